//! Workshops, checked: every lab's chapter states its minutes
//! (`{{#duration}}`) and has speaker notes (`{{#notes <slug>}}` and
//! `book/notes/<slug>.md`), and every agenda in `book/workshops/` adds up to
//! its stated length and has a page that shows it.

use std::{fs, path::Path};

use super::Problems;
use crate::book::{
    directive::well_formed,
    workshop::{Agenda, agenda_names},
};

pub(super) fn check(book_dir: &Path, labs: &[String], problems: &mut Problems) {
    for slug in labs {
        let chapter = fs::read_to_string(book_dir.join(format!("{slug}.md"))).unwrap_or_default();
        let shows = |name: &str, args: Option<&str>| {
            well_formed(&chapter).any(|directive| {
                directive.name == name && args.is_none_or(|args| directive.args == args)
            })
        };
        if !shows("duration", None) {
            problems.add(format!(
                "book/{slug}.md states no minutes: add {{{{#duration reading=N lab=N exercises=N quiz=N}}}} under its title"
            ));
        } else if let Some(problem) = reading_disagrees(&chapter) {
            problems.add(format!("book/{slug}.md: {problem}"));
        }
        if !shows("notes", Some(slug)) {
            problems.add(format!(
                "book/{slug}.md has no speaker notes: add {{{{#notes {slug}}}}} and book/notes/{slug}.md"
            ));
        } else if !book_dir.join(format!("notes/{slug}.md")).is_file() {
            problems.add(format!("book/notes/{slug}.md is missing"));
        }
    }
    let names = agenda_names(book_dir);
    if names.is_empty() {
        problems.add("book/workshops/ has no agenda".into());
    }
    let pages = super::files_with_extension(book_dir, "md").unwrap_or_default();
    for name in names {
        if let Err(error) = Agenda::load(book_dir, &name) {
            problems.add(format!("{error:#}"));
        }
        let directive = format!("{{{{#agenda {name}}}}}");
        let shown = pages.iter().any(|page| {
            fs::read_to_string(page).is_ok_and(|text| {
                well_formed(&text).any(|found| found.name == "agenda" && found.args == name)
            })
        });
        if !shown {
            problems.add(format!(
                "book/workshops/{name}.toml is not shown by any page ({directive})"
            ));
        }
    }
}

/// The front matter's "Reading time: N minutes" and the plan's `reading=N`
/// say the same thing twice; a chapter whose two numbers differ is named.
fn reading_disagrees(chapter: &str) -> Option<String> {
    let number = |text: &str| -> Option<u32> {
        let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let marker = "Reading time: ";
    let stated = number(&chapter[chapter.find(marker)? + marker.len()..])?;
    let planned = well_formed(chapter)
        .filter(|directive| directive.name == "duration")
        .find_map(|directive| directive.args.strip_prefix("reading="))
        .and_then(number)?;
    (stated != planned).then(|| {
        format!(
            "its front matter says {stated} minutes of reading, its {{{{#duration}}}} {planned}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::reading_disagrees;

    #[test]
    fn the_two_reading_times_of_a_chapter_must_agree() {
        let page = |stated: u32, planned: u32| {
            format!("Reading time: {stated} minutes.\n{{{{#duration reading={planned} lab=5}}}}")
        };
        assert_eq!(reading_disagrees(&page(15, 15)), None);
        let problem = reading_disagrees(&page(15, 20)).unwrap();
        assert!(
            problem.contains("15 minutes of reading, its {{#duration}} 20"),
            "{problem}"
        );
    }
}
