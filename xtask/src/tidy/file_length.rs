//! Strict check: no Rust file of the workspace is over the house's limit of
//! 500 lines, tests included (a file that long holds more than one thing).

use super::Problems;

/// The most lines a `.rs` file may have.
pub const MAX_LINES: usize = 500;

/// Checks one file; `relative` is its path from the workspace root.
pub(super) fn check_file(relative: &str, text: &str, problems: &mut Problems) {
    let lines = text.lines().count();
    if lines > MAX_LINES {
        problems.add(format!(
            "{relative} has {lines} lines, over the limit of {MAX_LINES}: split it into modules named for what they do"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_limit_is_named() {
        let mut problems = Problems::default();
        check_file(
            "labs/demo/src/lib.rs",
            &"//\n".repeat(MAX_LINES),
            &mut problems,
        );
        assert!(problems.0.is_empty(), "{:?}", problems.0);
        check_file(
            "labs/demo/src/lib.rs",
            &"//\n".repeat(MAX_LINES + 1),
            &mut problems,
        );
        assert_eq!(
            problems.0,
            [
                "labs/demo/src/lib.rs has 501 lines, over the limit of 500: split it into modules named for what they do"
            ]
        );
    }
}
