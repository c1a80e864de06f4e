//! Acceptance tests of the keepalive-race lab: the naive client, the 502 race
//! through the balancer, and the probe against real and broken servers.

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use lab_keepalive_race::{
    Case, Config, Reuse,
    backend::{Backend, BackendKind},
    day_and_night,
    probe::{IdleProbeConfig, probe},
    reuse_after, totals,
};
use lab_kit::{Lab, Mode, net::closed_loopback_port};
use tokio::{io::AsyncWriteExt, net::TcpListener};

const BIN: &str = env!("CARGO_BIN_EXE_lab-keepalive-race");

fn hyper_with_idle(idle: Duration) -> BackendKind {
    BackendKind::HyperTimer {
        header_read_timeout: idle,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn naive_client_succeeds_well_below_the_close_time_and_fails_well_above() {
    // hyper closes idle connections after 1 s; gaps of 0.3 s and 2 s sit far
    // on either side of it, so scheduling noise cannot move them across.
    let hyper = Backend::spawn(hyper_with_idle(Duration::from_secs(1)))
        .await
        .unwrap();
    let axum = Backend::spawn(BackendKind::AxumServe).await.unwrap();
    let (short, long, axum_long) = tokio::join!(
        reuse_after(hyper.addr, Duration::from_millis(300)),
        reuse_after(hyper.addr, Duration::from_secs(2)),
        reuse_after(axum.addr, Duration::from_secs(2)),
    );
    let (short, hint) = short.unwrap();
    assert_eq!(short, Reuse::Ok);
    assert_eq!(hint, None, "hyper advertises no Keep-Alive timeout");
    let (long, _) = long.unwrap();
    assert_ne!(
        long,
        Reuse::Ok,
        "a request 2 s into a 1 s idle timeout must fail"
    );
    // axum::serve has no timer: the same gap is harmless there.
    assert_eq!(axum_long.unwrap().0, Reuse::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balancer_gives_502s_only_when_the_backend_closes_first() {
    // The lab's own quick configuration, so the test checks what the book
    // shows. The parameters are argued in `Config::for_mode`: about 27
    // racing gaps expected at the night rates (the chance of none is about
    // exp(-27)) and 360 ms of slack for the backend-above case. This test ran
    // 20 times in a row on the 2-core build machine while other engineers
    // compiled: 20 of 20 passed.
    let config = Config::for_mode(Mode::Quick);
    let cases = day_and_night(&config).await.unwrap();
    for (case, points) in &cases {
        let totals = totals(&config, *case, points);
        assert_eq!(totals.other_errors, 0, "{case:?}: {totals:?}");
        // Every 502 is the race: a request sent on a reused connection.
        assert_eq!(
            totals.bad_gateway, totals.bad_gateway_on_reused,
            "{case:?}: {totals:?}"
        );
        // ...and its access-log line is the race's signature (502, target
        // status `-`, target time -1), while the target itself logged no 5xx:
        // the ELB-502-without-target-5xx pattern the chapter teaches.
        assert_eq!(
            totals.log_502_no_target_response, totals.bad_gateway,
            "{case:?}: {totals:?}"
        );
        assert_eq!(totals.log_target_5xx, 0, "{case:?}: {totals:?}");
        match case {
            Case::BackendAbove => {
                assert!(totals.requests >= 1000, "{totals:?}");
                assert_eq!(totals.bad_gateway, 0, "{totals:?}");
            }
            Case::BackendBelow => {
                assert!(totals.bad_gateway_low_rates >= 1, "{totals:?}");
                // The theory's direction: a larger share lost at night, where
                // gaps approach the timeout, than by day (about 3x apart in
                // the runs so far; asserted only as "more").
                assert!(
                    totals.bad_gateway_pct_low_rates > totals.bad_gateway_pct_high_rates,
                    "{totals:?}"
                );
                // The balancer did see most closes in time and dropped those
                // connections instead of failing on them.
                let seen: u64 = points.iter().map(|point| point.dropped_seen_closed).sum();
                assert!(seen > 0, "{points:?}");
                // The chapter's example lines: a 502 and a 200, in ALB's order.
                let examples = lab_keepalive_race::day_and_night::log_examples(&cases);
                let race = examples
                    .iter()
                    .find(|example| {
                        example.case == "backend-below" && example.elb_status_code == 502
                    })
                    .expect("a 502 line for backend-below");
                let fields: Vec<&str> = race.line.split(' ').collect();
                assert_eq!(&fields[6..10], &["-1", "-1", "502", "-"], "{}", race.line);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_measures_hyper_within_ten_percent_and_axum_as_never() {
    let configured = Duration::from_secs(1);
    let hyper = Backend::spawn(hyper_with_idle(configured)).await.unwrap();
    let axum = Backend::spawn(BackendKind::AxumServe).await.unwrap();
    let hyper_probe = IdleProbeConfig::new(hyper.addr, Duration::from_secs(3));
    let axum_probe = IdleProbeConfig::new(axum.addr, Duration::from_millis(1500));
    let (hyper_report, axum_report) = tokio::join!(probe(&hyper_probe), probe(&axum_probe));
    let hyper_report = hyper_report.unwrap();
    let closed = hyper_report
        .closed_after_ms
        .expect("hyper closes idle connections");
    assert!(
        (900.0..=1100.0).contains(&closed),
        "measured {closed} ms for a configured 1000 ms"
    );
    let axum_report = axum_report.unwrap();
    assert_eq!(axum_report.closed_after_ms, None);
    assert_eq!(axum_report.status, 200);
}

/// Runs the binary's probe subcommand with a kill timer; the child has its
/// own process group and is killed if the test ends early.
async fn run_probe(target: &str, window_s: &str) -> (Option<i32>, String, String, Duration) {
    run_probe_with(&["--target", target, "--window", window_s]).await
}

/// Runs `lab-keepalive-race probe` with `arguments`, bounded like [`run_probe`].
async fn run_probe_with(arguments: &[&str]) -> (Option<i32>, String, String, Duration) {
    let started = Instant::now();
    let child = tokio::process::Command::new(BIN)
        .arg("probe")
        .args(arguments)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let output = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("the probe must finish within its bound")
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        started.elapsed(),
    )
}

/// The probe's stderr after its progress line: exactly one `error:` line.
fn assert_one_error_line(stderr: &str) {
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|line| !line.starts_with("probing "))
        .collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].starts_with("error: lab-keepalive-race probe: "),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_command_gives_a_verdict_and_one_error_line_for_bad_servers() {
    // A real server: a verdict on stdout, exit 0.
    let axum = Backend::spawn(BackendKind::AxumServe).await.unwrap();
    let (code, stdout, _, _) = run_probe(&axum.addr.to_string(), "1").await;
    assert_eq!(code, Some(0));
    assert!(stdout.contains("did not close"), "{stdout}");
    // The verdict's last line ends with a newline, so a shell prompt or
    // stderr does not run into it.
    assert!(stdout.ends_with('\n'), "{stdout:?}");

    // A closed port, held closed until the test ends.
    let closed = closed_loopback_port().unwrap();
    let closed_port = closed.addr();
    // A server that answers garbage, and one that accepts and never answers.
    // Both hold their connection for at most 30 s.
    let garbage = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let garbage_addr = garbage.local_addr().unwrap();
    tokio::spawn(async move {
        if let Ok((mut socket, _)) = garbage.accept().await {
            let _ = socket.write_all(b"SSH-2.0-OpenSSH_9.6\r\n").await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    });
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    tokio::spawn(async move {
        if let Ok((_socket, _)) = silent.accept().await {
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    });

    let targets = [closed_port, garbage_addr, silent_addr].map(|addr| addr.to_string());
    let (refused, garbled, mute) = tokio::join!(
        run_probe(&targets[0], "1"),
        run_probe(&targets[1], "1"),
        run_probe(&targets[2], "1"),
    );
    for (name, (code, _, stderr, elapsed)) in [
        ("closed port", &refused),
        ("garbage", &garbled),
        ("silent", &mute),
    ] {
        assert_eq!(*code, Some(2), "{name}: {stderr}");
        assert_one_error_line(stderr);
        // The stated bound: 2 s connect + 5 s response + 1 s window.
        assert!(*elapsed < Duration::from_secs(12), "{name}: {elapsed:?}");
    }
    assert!(refused.2.contains("refused"), "{}", refused.2);
    assert!(garbled.2.contains("not HTTP"), "{}", garbled.2);
    assert!(mute.2.contains("did not answer"), "{}", mute.2);

    // Remote targets are refused without --allow-remote, before any packet.
    let (code, _, stderr, elapsed) = run_probe("192.0.2.1:80", "1").await;
    assert_eq!(code, Some(2));
    assert!(stderr.contains("not a loopback"), "{stderr}");
    assert!(elapsed < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_command_refuses_bad_arguments_in_one_line() {
    for (arguments, expected) in [
        (&["--target"][..], "--target needs a value"),
        (
            &["--target", "127.0.0.1:9", "--window", "soon"],
            "is not a number of seconds",
        ),
        (
            &["--target", "127.0.0.1:9", "--bogus", "1"],
            "unknown probe flag",
        ),
        (&["--window", "1"], "--target HOST:PORT is required"),
    ] {
        let (code, stdout, stderr, elapsed) = run_probe_with(arguments).await;
        assert_eq!(code, Some(2), "{arguments:?}: {stderr}");
        assert_eq!(stdout, "", "{arguments:?}");
        assert_one_error_line(&stderr);
        assert!(stderr.contains(expected), "{arguments:?}: {stderr}");
        assert!(
            elapsed < Duration::from_secs(5),
            "{arguments:?}: {elapsed:?}"
        );
    }
}
