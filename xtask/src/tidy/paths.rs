//! A file the book names exists: a path in backticks that starts with one of
//! the workspace's source folders (`labs/overload/tests/overload/guard.rs`)
//! must be a file or folder of the checkout, so moving a file cannot leave a
//! page pointing the reader at nothing.

use std::{fs, path::Path};

use super::Problems;

/// The folders whose files the book may name.
const SOURCE_FOLDERS: [&str; 4] = ["labs/", "exercises/", "widgets/", "xtask/"];

pub(super) fn check(root: &Path, pages: &[std::path::PathBuf], problems: &mut Problems) {
    for page in pages {
        let text = fs::read_to_string(page).unwrap_or_default();
        for path in named_paths(&text) {
            if !root.join(path).exists() {
                let shown = page.strip_prefix(root).unwrap_or(page);
                problems.add(format!(
                    "{}: names `{path}`, which is not in the checkout",
                    shown.display()
                ));
            }
        }
    }
}

/// The backticked words of `text` that are paths under a source folder
/// (without a placeholder such as `<slug>`), with a `:anchor` cut off.
fn named_paths(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|word| SOURCE_FOLDERS.iter().any(|folder| word.starts_with(folder)))
        .filter(|word| !word.contains(['<', '*', ' ', '{']))
        .map(|word| word.split(':').next().unwrap_or(word))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn backticked_source_paths_are_found_and_placeholders_skipped() {
        let text =
            "See `labs/a/src/b.rs:anchor`, `cargo test`, `labs/<slug>/tests` and `xtask/src`.";
        assert_eq!(super::named_paths(text), ["labs/a/src/b.rs", "xtask/src"]);
    }
}
