//! Strict check: a lab's chapter (`book/<slug>.md`) draws only its own lab's
//! charts, tables and values; a page that is not a lab's chapter (the
//! introduction, the Rust-and-Node comparison) may quote values and tables
//! from any lab, but draws no charts.

use super::Problems;
use crate::book::directive::data_directives;

/// Checks one page: `page` is its file name in book/ (`conn-reuse.md`),
/// `labs` every lab's slug.
pub(super) fn check_page(page: &str, text: &str, labs: &[String], problems: &mut Problems) {
    let own = page.strip_suffix(".md").unwrap_or(page);
    let is_lab = labs.iter().any(|slug| slug == own);
    for quoted in data_directives(text) {
        let directive = &quoted.directive;
        let at = format!(
            "book/{page}:{}: {}",
            directive.line,
            &text[directive.span.clone()]
        );
        if is_lab && quoted.lab != own {
            problems.add(format!(
                "{at} shows lab {}'s data: the chapter of lab {own} shows only its own lab's",
                quoted.lab
            ));
        } else if !is_lab && directive.name == "chart" {
            problems.add(format!(
                "{at}: {page} is not a lab's chapter, so it draws no charts (it may quote values)"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(page: &str, text: &str) -> Vec<String> {
        let labs = ["demo".to_string(), "other".to_string()];
        let mut problems = Problems::default();
        check_page(page, text, &labs, &mut problems);
        problems.0
    }

    #[test]
    fn a_chapter_shows_only_its_own_labs_data() {
        let own = "{{#chart demo/a}}\n{{#table demo summary n}} and {{#value demo s n}}\n";
        assert_eq!(problems("demo.md", own), Vec::<String>::new());
        // Its own lab's full run is its own lab's.
        let full = "{{#table demo@full summary n}} {{#claim demo@full s:n > 1 | {left}}}";
        assert_eq!(problems("demo.md", full), Vec::<String>::new());
        assert_eq!(problems("other.md", full).len(), 2);
        let borrowed = format!("{own}text\n{{{{#value other s n}}}}\n{{{{#chart other/b}}}}\n");
        let found = problems("demo.md", &borrowed);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].starts_with("book/demo.md:4: {{#value other s n}} shows lab other's data"),
            "{found:?}"
        );
        assert!(
            found[1].starts_with("book/demo.md:5: {{#chart other/b}}"),
            "{found:?}"
        );
        // An escaped directive is text about a directive.
        assert!(problems("demo.md", "\\{{#chart other/b}}").is_empty());
    }

    #[test]
    fn a_page_that_is_no_lab_quotes_values_but_draws_no_charts() {
        let quoting = "{{#value demo s n}} and {{#value other s n}}, {{#table other summary n}}";
        assert!(problems("introduction.md", quoting).is_empty());
        let found = problems("introduction.md", "intro\n{{#chart demo/a}}");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("book/introduction.md:2: {{#chart demo/a}}")
                && found[0].contains("draws no charts"),
            "{found:?}"
        );
    }
}
