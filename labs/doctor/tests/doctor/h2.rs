//! The HTTP/2 checks against the lab's stock `axum::serve` service over h2c
//! (prior knowledge: axum::serve answers HTTP/2 on a plain port), and, with
//! `--graceful true`, the same service with axum's graceful shutdown:
//! hyper's GOAWAY against none at all. nginx's answers over TLS are in
//! `tls.rs`.

use std::time::Duration;

use serde_json::Value;

use crate::doctor::{SERVICES, args, doctor};

/// Each finding of a `--json` report, by check name: (grade, measured).
fn findings(report: &Value) -> Vec<(String, String, String)> {
    report["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("{report}"))
        .iter()
        .map(|finding| {
            let field = |name: &str| finding[name].as_str().unwrap_or_default().to_string();
            (field("check"), field("grade"), field("measured"))
        })
        .collect()
}

fn finding<'a>(all: &'a [(String, String, String)], check: &str) -> (&'a str, &'a str) {
    let (_, grade, measured) = all
        .iter()
        .find(|(name, _, _)| name == check)
        .unwrap_or_else(|| panic!("{check} in {all:?}"));
    (grade, measured)
}

fn run(words: &[&str], limit: Duration) -> Value {
    let ran = doctor(&args(words), limit);
    serde_json::from_str(&ran.stdout).unwrap_or_else(|_| panic!("{}{}", ran.stdout, ran.stderr))
}

/// axum::serve over h2c keeps what nothing tells it to end (an idle
/// connection, a header block that never ends, a body that stops), and
/// refuses a stream past hyper's limit with REFUSED_STREAM.
#[test]
fn stock_axum_over_h2c_keeps_what_it_is_not_told_to_end() {
    let port = lab_kit::net::free_loopback_port().unwrap().to_string();
    let words = [
        "--h2c",
        "--json",
        "--window",
        "2s",
        "--port",
        &port,
        "--slow-path",
        "/slow",
        "--body-path",
        "/upload",
        "h2-idle",
        "h2-slow-head",
        "h2-slow-body",
        "h2-streams",
        "h2-cancel",
        "--",
        SERVICES,
        "serve",
        "stock-axum",
        "--port",
        &port,
    ];
    let report = run(&words, Duration::from_secs(40));
    assert_eq!(
        report["transport"], "plain TCP, HTTP/2 with prior knowledge",
        "{report}"
    );
    let all = findings(&report);
    let (grade, measured) = finding(&all, "h2-idle");
    assert_eq!(grade, "warn", "{measured}");
    assert!(
        measured.starts_with("still open at 2.00 s; PING answered in "),
        "{measured}"
    );
    for check in ["h2-slow-head", "h2-slow-body"] {
        assert_eq!(
            finding(&all, check),
            ("fail", "still open at 2.00 s"),
            "{check}"
        );
    }
    let (grade, measured) = finding(&all, "h2-streams");
    assert_eq!(grade, "pass", "{measured}");
    assert!(
        measured.ends_with("past it: RST_STREAM REFUSED_STREAM"),
        "{measured}"
    );
    let (grade, measured) = finding(&all, "h2-cancel");
    assert_eq!(grade, "pass", "{measured}");
    assert!(measured.starts_with("after RST_STREAM(CANCEL), the next request answered 200"));
}

/// SIGTERM with three streams in flight (300 ms of CPU each, on the
/// service's two workers): axum's graceful shutdown sends
/// GOAWAY twice (the last stream id 2^31 - 1, then the real one), answers a
/// stream opened between the two, and exits 0; without it, the process
/// dies of the signal and every stream goes with it, with no GOAWAY.
#[test]
fn goaway_with_axums_graceful_shutdown_and_none_without_it() {
    for (graceful, grade, says) in [
        ("true", "pass", "GOAWAY NO_ERROR after "),
        (
            "false",
            "fail",
            "no GOAWAY; 0/3 in flight completed; exit signal 15 (SIGTERM)",
        ),
    ] {
        let port = lab_kit::net::free_loopback_port().unwrap().to_string();
        let words = [
            "--h2c",
            "--json",
            "--grace",
            "5s",
            "--port",
            &port,
            "--heavy-path",
            "/report",
            "h2-goaway",
            "--",
            SERVICES,
            "serve",
            "stock-axum",
            "--graceful",
            graceful,
            "--port",
            &port,
        ];
        let report = run(&words, Duration::from_secs(40));
        let all = findings(&report);
        let (got, measured) = finding(&all, "h2-goaway");
        assert_eq!(got, grade, "graceful {graceful}: {measured}");
        assert!(
            measured.starts_with(says),
            "graceful {graceful}: {measured}"
        );
        if graceful == "true" {
            assert!(
                measured.contains(
                    "(last stream 2147483647, then 7); 3/3 in flight completed; \
                     stream 7, opened after it, was answered; exit 0"
                ),
                "{measured}"
            );
        }
    }
}

/// Asked for the HTTP/2 checks on a port that speaks only HTTP/1.1 (the
/// hardened service), the doctor says so in one line, exit 2.
#[test]
fn h2c_against_an_http1_only_server_is_one_line_and_exit_2() {
    let port = lab_kit::net::free_loopback_port().unwrap().to_string();
    let words = [
        "--h2c", "--port", &port, "h2-idle", "--", SERVICES, "serve", "hardened", "--port", &port,
    ];
    let ran = doctor(&args(&words), Duration::from_secs(20));
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("closed the connection before its SETTINGS (not HTTP/2?)"),
        "{}",
        ran.stderr
    );
}
