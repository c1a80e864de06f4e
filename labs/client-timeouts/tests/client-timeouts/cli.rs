//! The binary's bad-input paths: one line on stderr and exit code 2.

use std::process::Command;

fn run(arguments: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_lab-client-timeouts"))
        .args(arguments)
        .output()
        .expect("the lab binary runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn bad_input_gets_one_line_and_exit_2() {
    for arguments in [
        &["--bogus"][..],
        &["check", "--target", "192.0.2.1:80"],
        &["check", "--target", "127.0.0.1:80", "--wat", "1"],
        &["check"],
    ] {
        let (code, stderr) = run(arguments);
        assert_eq!(code, Some(2), "{arguments:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{arguments:?}: {stderr}");
        // `error: <program>: `, the program naming the subcommand that speaks.
        let program = match arguments[0] {
            "check" => "lab-client-timeouts check",
            _ => "lab-client-timeouts",
        };
        let prefix = format!("error: {program}: ");
        assert!(stderr.starts_with(&prefix), "{arguments:?}: {stderr}");
    }
    let (_, refused) = run(&["check", "--target", "10.0.0.1:80"]);
    assert!(refused.contains("not a loopback"), "{refused}");
}

#[test]
fn check_names_the_phase_against_a_closed_port() {
    // A port nobody listens on: refused, one line, exit 2.
    let closed = lab_kit::net::closed_loopback_port().expect("a closed loopback port");
    let target = closed.addr().to_string();
    let (code, stderr) = run(&["check", "--target", &target]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}
