//! What checks the reader, checked: every lab's chapter has at least two
//! exercises (each with its files, its task and its solution in the
//! chapter), a page in the interview bank with four to six questions in the
//! bank's shape, and links into the glossary that all land on a term; the
//! cheat sheet quotes the labs' runs.

use std::{collections::BTreeSet, fs, path::Path};

use super::Problems;
use crate::{book::directive::well_formed, exercise::ExerciseCrate};

/// The labels every question of the interview bank carries.
const BANK_LABELS: [&str; 3] = [
    "**In 30 seconds.**",
    "**The full answer.**",
    "**Follow-ups.**",
];

pub(super) fn check(
    book_dir: &Path,
    labs: &[String],
    exercises: &[ExerciseCrate],
    problems: &mut Problems,
) {
    let read = |page: &str| fs::read_to_string(book_dir.join(page)).unwrap_or_default();
    let summary = read("SUMMARY.md");
    let workspace = fs::read_to_string(book_dir.join("../Cargo.toml")).unwrap_or_default();
    let glossary = read("glossary.md");
    let terms = glossary_anchors(&glossary);
    if terms.is_empty() {
        problems.add("book/glossary.md has no terms (### headings)".into());
    }
    for page in [
        "glossary.md",
        "cheat-sheet.md",
        "interviews/system-design.md",
    ] {
        if !summary.contains(&format!("({page})")) {
            problems.add(format!("book/SUMMARY.md does not list {page}"));
        }
    }
    let cheat_sheet = read("cheat-sheet.md");
    let values = well_formed(&cheat_sheet)
        .filter(|directive| directive.name == "value")
        .count();
    if values < 10 {
        problems.add(
            "book/cheat-sheet.md quotes fewer than 10 values of the labs' runs ({{#value}})".into(),
        );
    }
    if let Err(problem) = bank_questions(&read("interviews/system-design.md"), 1..=1) {
        problems.add(format!("book/interviews/system-design.md: {problem}"));
    }
    for slug in labs {
        let chapter = read(&format!("{slug}.md"));
        let mine: Vec<&ExerciseCrate> = exercises.iter().filter(|e| &e.chapter == slug).collect();
        if mine.len() < 2 {
            problems.add(format!(
                "book/{slug}.md has {} exercise(s) under exercises/: every lab chapter has at least 2",
                mine.len()
            ));
        }
        for exercise in mine {
            check_exercise(exercise, &chapter, problems);
            let profile = format!("[profile.release.package.{}]\nopt-level = 0", exercise.name);
            if !workspace.contains(&profile) {
                problems.add(format!(
                    "Cargo.toml has no `{profile}`: an exercise's check is built at opt-level 0 (see the comment there)"
                ));
            }
        }
        let bank = format!("interviews/{slug}.md");
        if !summary.contains(&format!("({bank})")) {
            problems.add(format!("book/SUMMARY.md does not list {bank}"));
        }
        if let Err(problem) = bank_questions(&read(&bank), 4..=6) {
            problems.add(format!("book/{bank}: {problem}"));
        }
        let linked = glossary_links(&chapter);
        let distinct: BTreeSet<&str> = linked.iter().copied().collect();
        if distinct.len() < 3 {
            problems.add(format!(
                "book/{slug}.md links {} glossary term(s): link the first use of at least 3",
                distinct.len()
            ));
        }
        for anchor in &distinct {
            if linked.iter().filter(|linked| *linked == anchor).count() > 1 {
                problems.add(format!(
                    "book/{slug}.md links glossary.md#{anchor} more than once: link its first use only"
                ));
            }
        }
    }
    for page in super::files_with_extension(book_dir, "md").unwrap_or_default() {
        let text = fs::read_to_string(&page).unwrap_or_default();
        for anchor in glossary_links(&text) {
            if !terms.contains(anchor) {
                problems.add(format!(
                    "{}: glossary.md#{anchor} is not a term of book/glossary.md",
                    page.display()
                ));
            }
        }
    }
}

/// An exercise has the reader's file with its TODO, a solution, what its
/// check fails with as shipped (`cargo xtask test` runs it both ways), and
/// its task and solution in its chapter.
fn check_exercise(exercise: &ExerciseCrate, chapter: &str, problems: &mut Problems) {
    let name = &exercise.name;
    for file in ["src/lib.rs", "src/main.rs", "solution/lib.rs", "README.md"] {
        if !exercise.dir.join(file).is_file() {
            problems.add(format!("exercises/{name} has no {file}"));
        }
    }
    if exercise.fails_with.trim().is_empty() {
        problems.add(format!(
            "exercises/{name}/Cargo.toml: fails_with is empty; name what the check's FAIL line says as shipped"
        ));
    }
    let yours = fs::read_to_string(exercise.dir.join("src/lib.rs")).unwrap_or_default();
    if !yours.contains("TODO") {
        problems.add(format!(
            "exercises/{name}/src/lib.rs has no TODO where the reader works"
        ));
    }
    for file in ["README.md", "solution/lib.rs"] {
        let path = format!("../exercises/{name}/{file}");
        let include = format!("{{{{#include {path}}}}}");
        let shown = well_formed(chapter)
            .any(|directive| directive.name == "include" && directive.args == path);
        if !shown {
            problems.add(format!(
                "book/{}.md does not show exercises/{name}/{file} ({include})",
                exercise.chapter
            ));
        }
    }
}

/// Checks the shape of an interview bank page: `## N. "question"` sections,
/// as many as `count` allows, each with the three labels.
fn bank_questions(text: &str, count: std::ops::RangeInclusive<usize>) -> Result<(), String> {
    let sections: Vec<&str> = text.split("\n## ").skip(1).collect();
    if !count.contains(&sections.len()) {
        return Err(format!(
            "{} question(s) (## headings); the bank wants {} to {}",
            sections.len(),
            count.start(),
            count.end()
        ));
    }
    for (index, section) in sections.iter().enumerate() {
        let title = section.lines().next().unwrap_or_default();
        if !title.starts_with(&format!("{}. ", index + 1)) {
            return Err(format!("question {} is titled {title:?}", index + 1));
        }
        for label in BANK_LABELS {
            if !section.contains(label) {
                return Err(format!("question {} has no {label}", index + 1));
            }
        }
    }
    Ok(())
}

/// The anchors of the glossary's terms (`### Term`), made as mdBook makes a
/// heading's id: lower case, spaces to `-`, only letters, digits, `-`, `_`.
fn glossary_anchors(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("### "))
        .map(|term| {
            term.trim()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => {
                        Some(c.to_ascii_lowercase())
                    }
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// The anchors a page links in the glossary, in order, repeats kept.
fn glossary_links(text: &str) -> Vec<&str> {
    text.match_indices("glossary.md#")
        .map(|(at, found)| {
            let rest = &text[at + found.len()..];
            let end = rest.find([')', '"', ' ', '\'']).unwrap_or(rest.len());
            &rest[..end]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUESTION: &str =
        "**In 30 seconds.** a\n\n**The full answer.** b\n\n**Follow-ups.**\n- c\n";

    #[test]
    fn a_bank_page_has_numbered_questions_with_every_label() {
        let page = |count: usize| {
            let mut text = String::from("# Interview bank: x\n\nIntro.\n");
            for number in 1..=count {
                text.push_str(&format!("\n## {number}. \"Why?\"\n\n{QUESTION}"));
            }
            text
        };
        assert_eq!(bank_questions(&page(4), 4..=6), Ok(()));
        assert!(
            bank_questions(&page(3), 4..=6)
                .unwrap_err()
                .contains("3 question(s)")
        );
        let missing = page(4).replacen("**Follow-ups.**", "Follow-ups", 1);
        assert!(
            bank_questions(&missing, 4..=6)
                .unwrap_err()
                .contains("question 1 has no")
        );
        let unnumbered = page(4).replacen("## 2. ", "## Two ", 1);
        assert!(
            bank_questions(&unnumbered, 4..=6)
                .unwrap_err()
                .contains("question 2 is titled")
        );
    }

    #[test]
    fn glossary_anchors_are_made_as_mdbook_makes_heading_ids() {
        let anchors = glossary_anchors(
            "# Glossary\n\n### TIME_WAIT\n\n### Happy Eyeballs\n\n### 502 Bad Gateway\n",
        );
        let expected: BTreeSet<String> = ["time_wait", "happy-eyeballs", "502-bad-gateway"]
            .map(String::from)
            .into();
        assert_eq!(anchors, expected);
    }

    #[test]
    fn glossary_links_are_read_in_order_with_repeats() {
        let text = "a [TIME_WAIT](glossary.md#time_wait) and [keep-alive](glossary.md#keep-alive), \
                    again [it](glossary.md#time_wait)";
        assert_eq!(
            glossary_links(text),
            ["time_wait", "keep-alive", "time_wait"]
        );
    }
}
