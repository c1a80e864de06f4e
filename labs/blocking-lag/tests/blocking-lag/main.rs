//! The acceptance tests of the blocking-lag lab: real servers, a real prober
//! process, and assertions on direction with margins wide enough for a busy
//! 2-core machine (the report takes about a second in a debug build). One
//! test binary; the report read from SQLite, in memory or streamed, is the
//! module `streaming`.

mod streaming;
mod units;

use std::{path::PathBuf, process::Stdio, time::Duration};

use lab_blocking_lag::{Config, HandlerSetup, Measured, measure, summary::HandlerSummary};

/// The variants share two cores; run them one at a time even though the test
/// harness runs tests on parallel threads.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Rows for a debug build: long enough that a stall dwarfs scheduling noise.
const ROWS: usize = 400_000;

fn lab_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_lab-blocking-lag"))
}

async fn measure_named(name: &str) -> Measured {
    let variant = HandlerSetup::named(name).expect("a known variant");
    let config = Config::with_variants(ROWS, 200, &[variant], lab_binary());
    measure_with(&variant, &config).await
}

async fn measure_with(variant: &HandlerSetup, config: &Config) -> Measured {
    let _one_at_a_time = SERIAL.lock().await;
    let name = variant.name;
    let measured = measure(variant, config)
        .await
        .unwrap_or_else(|error| panic!("variant {name}: {error:#}"));
    eprintln!("{name}: {:?}", measured.summary);
    measured
}

/// A setup whose reports run on the runtime's workers: the mechanism, each
/// report in `slow_polls` slow polls of the /report future; the symptom, seen
/// from another process, some /health waiting at least `share` of the report;
/// and no /health failing.
async fn measure_stall(name: &str, slow_polls: u64, share: f64) -> HandlerSummary {
    let summary = measure_named(name).await.summary;
    assert_eq!(summary.report_slow_polls, slow_polls, "{summary:?}");
    assert!(
        summary.health_max_ms >= share * summary.report_ms,
        "largest /health {:.1} ms, report {:.1} ms",
        summary.health_max_ms,
        summary.report_ms
    );
    assert_eq!(summary.health_failed, 0, "{summary:?}");
    summary
}

#[tokio::test(flavor = "multi_thread")]
async fn current_thread_runtime_stalls_health_for_the_whole_report() {
    // One poll of the /report future ran the whole report; some /health
    // waited at least half of it (in theory: nearly all of it).
    let summary = measure_stall("current-thread", 1, 0.5).await;
    // ...and from inside: the timer task could not run either.
    assert!(
        summary.lag_max_ms >= 0.5 * summary.report_ms,
        "largest lag {:.1} ms, report {:.1} ms",
        summary.lag_max_ms,
        summary.report_ms
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn two_reports_on_two_workers_stall_health_too() {
    // Both workers are busy while the reports overlap. Whether they overlap
    // is the scheduler's race: in one CI run of many the second report's
    // connection waited on the first report's worker, ran after it, and
    // /health never slowed. So three rounds, and the mechanism must show in
    // at least one: every report a slow poll, a round stalled, and some
    // /health waiting a third of a report (they may not overlap fully on a
    // busy machine).
    const ROUNDS: usize = 3;
    let variant = HandlerSetup::named("two-reports")
        .expect("a known variant")
        .repeated();
    let mut config = Config::with_variants(ROWS, 200, &[variant], lab_binary());
    config.race_rounds = ROUNDS;
    let summary = measure_with(&variant, &config).await.summary;
    assert_eq!(summary.rounds, ROUNDS, "{summary:?}");
    assert_eq!(summary.report_slow_polls, 2 * ROUNDS as u64, "{summary:?}");
    assert!(summary.stalled_rounds >= 1, "{summary:?}");
    assert!(
        summary.health_max_ms >= summary.report_ms / 3.0,
        "largest /health {:.1} ms, report {:.1} ms",
        summary.health_max_ms,
        summary.report_ms
    );
    assert_eq!(summary.health_failed, 0, "{summary:?}");
}

/// The bound for /health p99 while two reports run on the blocking pool. A
/// /health answer takes well under a millisecond on an idle machine; 250 ms
/// leaves room for two cores shared with compilers, and is still a fraction
/// of the stall the inline report causes.
const SPAWN_BLOCKING_P99_BOUND_MS: f64 = 250.0;

#[tokio::test(flavor = "multi_thread")]
async fn spawn_blocking_keeps_health_fast() {
    let measured = measure_named("spawn-blocking").await;
    let summary = &measured.summary;
    assert!(
        summary.health_p99_ms < SPAWN_BLOCKING_P99_BOUND_MS,
        "/health p99 {:.1} ms with spawn_blocking",
        summary.health_p99_ms
    );
    // The mechanism: the /report future itself is only ever polled briefly;
    // its polls add up to a small part of the report's time.
    assert!(
        summary.report_slow_poll_ms < 0.25 * summary.report_ms,
        "slow polls of /report: {:.1} ms of a {:.1} ms report",
        summary.report_slow_poll_ms,
        summary.report_ms
    );
    assert_eq!(summary.health_failed, 0, "{summary:?}");
    // Every probe made it onto the timeline, and the report ran once per request.
    assert!(measured.health.len() >= 10);
    assert_eq!(summary.reports, 2);
}

#[test]
fn prober_refuses_a_target_off_loopback_and_exits_two() {
    let output = std::process::Command::new(lab_binary())
        .args(["__prober", "--target", "192.0.2.1:80", "--max-ms", "100"])
        .stdin(Stdio::null())
        .output()
        .expect("running the prober");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("loopback"), "{stderr}");
}

#[test]
fn prober_stops_on_its_own_when_stdin_closes() {
    // Nothing listens on this port (held closed): every probe fails fast,
    // and the prober must still exit once stdin is closed.
    let closed = lab_kit::net::closed_loopback_port().expect("a closed loopback port");
    let port = closed.port();
    let started = std::time::Instant::now();
    let output = std::process::Command::new(lab_binary())
        .args([
            "__prober",
            "--target",
            &format!("127.0.0.1:{port}"),
            "--interval-ms",
            "5",
            "--max-ms",
            "20000",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("running the prober");
    assert!(output.status.success(), "{output:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the prober kept running for {:?} after stdin closed",
        started.elapsed()
    );
}
