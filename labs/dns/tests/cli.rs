//! The binary's bad-input path: one line on stderr and exit code 2.

use std::process::Command;

#[test]
fn an_unknown_flag_gets_one_line_and_exit_2() {
    let output = Command::new(env!("CARGO_BIN_EXE_lab-dns"))
        .arg("--bogus")
        .output()
        .expect("the lab binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}
