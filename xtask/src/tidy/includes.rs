//! Every `{{#include path}}`, `{{#include path:anchor}}` and line range in a
//! chapter resolves to non-empty text.

use std::{fs, path::Path};

use anyhow::{Context, Result};

use super::Problems;
use crate::book::directive::directives;

/// `{{#include path}}`, `{{#include path:anchor}}` and line ranges must resolve
/// to non-empty text; every directive of the chapter must be closed (the other
/// checks read a chapter only up to one that is not).
pub(super) fn check_includes(chapter: &Path, problems: &mut Problems) -> Result<()> {
    let text =
        fs::read_to_string(chapter).with_context(|| format!("reading {}", chapter.display()))?;
    let dir = chapter.parent().context("a chapter has a folder")?;
    for found in directives(&text) {
        let directive = match found {
            Ok(directive) => directive,
            Err(error) => {
                problems.add(format!("{}: {error:#}", chapter.display()));
                break;
            }
        };
        if !["include", "rustdoc_include"].contains(&directive.name) {
            continue;
        }
        if let Err(error) = resolve_include(dir, directive.args) {
            problems.add(format!(
                "{}:{}: {}: {error:#}",
                chapter.display(),
                directive.line,
                &text[directive.span.clone()]
            ));
        }
    }
    Ok(())
}

fn resolve_include(dir: &Path, argument: &str) -> Result<()> {
    let mut parts = argument.splitn(2, ':');
    let file = parts.next().unwrap_or_default();
    let text = fs::read_to_string(dir.join(file)).with_context(|| format!("cannot read {file}"))?;
    let selected: String = match parts.next() {
        None => text,
        Some(selector)
            if selector
                .chars()
                .next()
                .is_some_and(|first| first.is_ascii_digit())
                || selector.starts_with(':') =>
        {
            let (start, end) = selector.split_once(':').unwrap_or((selector, selector));
            let start: usize = if start.is_empty() {
                1
            } else {
                start.parse().context("bad line range")?
            };
            let end: usize = if end.is_empty() {
                usize::MAX
            } else {
                end.parse().context("bad line range")?
            };
            text.lines()
                .skip(start.saturating_sub(1))
                .take(end.saturating_sub(start) + 1)
                .collect::<Vec<_>>()
                .join("\n")
        }
        Some(anchor) => {
            anchored(&text, anchor).with_context(|| format!("no anchor {anchor:?} in {file}"))?
        }
    };
    anyhow::ensure!(!selected.trim().is_empty(), "selects no text");
    Ok(())
}

/// The lines between `ANCHOR: name` and `ANCHOR_END: name`, minus anchor lines.
fn anchored(text: &str, anchor: &str) -> Option<String> {
    let start_marker = format!("ANCHOR: {anchor}");
    let end_marker = format!("ANCHOR_END: {anchor}");
    let mut inside = false;
    let mut found = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        let marker_end =
            |marker: &str| line.trim_end().ends_with(marker) && line.contains("ANCHOR");
        if marker_end(&start_marker) {
            inside = true;
            found = true;
        } else if marker_end(&end_marker) {
            inside = false;
        } else if inside && !line.contains("ANCHOR:") && !line.contains("ANCHOR_END:") {
            lines.push(line);
        }
    }
    found.then(|| lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "//! demo\n// ANCHOR: outer\nfn a() {}\n// ANCHOR: inner\nfn b() {}\n// ANCHOR_END: inner\n// ANCHOR_END: outer\n// ANCHOR: empty\n// ANCHOR_END: empty\n";

    #[test]
    fn anchors_nest_and_empty_ones_are_found() {
        assert_eq!(anchored(SOURCE, "outer").unwrap(), "fn a() {}\nfn b() {}");
        assert_eq!(anchored(SOURCE, "inner").unwrap(), "fn b() {}");
        assert_eq!(anchored(SOURCE, "empty").unwrap(), "");
        assert!(anchored(SOURCE, "missing").is_none());
    }

    #[test]
    fn includes_resolve_or_say_why_not() {
        let dir = std::env::temp_dir().join(format!("xtask-tidy-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("lib.rs"), SOURCE).unwrap();
        assert!(resolve_include(&dir, "lib.rs:inner").is_ok());
        assert!(resolve_include(&dir, "lib.rs:2:3").is_ok());
        assert!(resolve_include(&dir, "lib.rs").is_ok());
        assert!(
            format!("{:#}", resolve_include(&dir, "lib.rs:empty").unwrap_err()).contains("no text")
        );
        assert!(
            format!("{:#}", resolve_include(&dir, "lib.rs:nope").unwrap_err())
                .contains("no anchor")
        );
        assert!(resolve_include(&dir, "missing.rs").is_err());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_chapter_names_its_broken_includes_and_a_directive_not_closed() {
        let dir = std::env::temp_dir().join(format!("xtask-tidy-chapter-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("lib.rs"), SOURCE).unwrap();
        let chapter = dir.join("chapter.md");
        fs::write(
            &chapter,
            "{{#include lib.rs:inner}}\n\\{{#include gone.rs}} is text\n\
             {{#include lib.rs:nope}}\n{{#fact a\n",
        )
        .unwrap();
        let mut problems = Problems::default();
        check_includes(&chapter, &mut problems).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        let shown = chapter.display();
        assert_eq!(problems.0.len(), 2, "{:?}", problems.0);
        assert!(
            problems.0[0].starts_with(&format!(
                "{shown}:3: {{{{#include lib.rs:nope}}}}: no anchor"
            )),
            "{:?}",
            problems.0
        );
        assert_eq!(
            problems.0[1],
            format!("{shown}: line 4: {{{{#fact is not closed with }}}}")
        );
    }
}
