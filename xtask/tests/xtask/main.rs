//! The xtask as a reader meets it: the built binary, run from the workspace
//! root, given bad input. Each mistake is one line on stderr that names what
//! is wrong, exit 2, and nothing built or run first.
//!
//! It is also what makes `cargo test` build the xtask's binary itself (not
//! only its unit-test harness), so the lints `cargo xtask test` runs through
//! that build see the code a test build leaves out (see `tasks::test`).

use std::process::{Command, Output};

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("the xtask binary runs")
}

/// Exit 2, one line of stderr that starts with `error: xtask:` and holds
/// `needle`, and nothing on stdout.
fn assert_one_line_exit_2(args: &[&str], needle: &str) {
    let output = xtask(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.starts_with("error: xtask: "), "{args:?}: {stderr}");
    assert!(stderr.contains(needle), "{args:?}: {stderr}");
    assert!(output.stdout.is_empty(), "{args:?}: {:?}", output.stdout);
}

#[test]
fn an_unknown_task_is_one_line_and_exit_2() {
    assert_one_line_exit_2(&["--frobnicate"], "unknown task \"--frobnicate\"");
}

#[test]
fn an_unknown_lab_names_the_labs_there_are() {
    assert_one_line_exit_2(&["lab", "no-such-lab"], "the labs are: backoff-jitter");
}

#[test]
fn an_unknown_exercise_names_the_exercises_there_are() {
    assert_one_line_exit_2(
        &["exercise", "verify", "no-such-exercise"],
        "unknown exercise \"no-such-exercise\"",
    );
}

#[test]
fn a_missing_data_folder_is_named() {
    assert_one_line_exit_2(
        &["charts", "--data", "/no/such/folder"],
        "/no/such/folder: no such directory",
    );
}
