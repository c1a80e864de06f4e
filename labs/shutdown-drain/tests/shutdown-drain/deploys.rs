//! The four deploys, each run for real (a child process, a real SIGTERM),
//! asserting what each shutdown style must do.
//!
//! Timing margins: the tests give the balancer three readiness polls before
//! the server stops accepting (the lab's modes give two, as the production
//! values do), so a poll that a busy 2-core machine runs late cannot fail a
//! test. The deploys run one at a time, so they do not compete for the CPU.

use lab_kit::Series;
use lab_kit::{Lab, Mode};
use lab_shutdown_drain::{Config, DeployCase, child::pid_exists, run_deploy};

/// An async mutex: each test has its own runtime, and the guard is held
/// across the whole deploy.
pub(crate) static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn config() -> Config {
    let mut config = Config::for_mode(Mode::Quick);
    config.server_exe = env!("CARGO_BIN_EXE_lab-shutdown-drain").into();
    config.drain_wait_ms = 3 * config.readiness_period_ms;
    config.hard_deadline_ms = config.drain_wait_ms + config.slow_ms + 400;
    config.termination_grace_ms = config.hard_deadline_ms + 1_500;
    config
}

async fn deploy(case: DeployCase, config: &Config) -> lab_shutdown_drain::Deploy {
    let _serial = ONE_AT_A_TIME.lock().await;
    let deploy = run_deploy(case, config)
        .await
        .unwrap_or_else(|error| panic!("{}: {error:#}", case.series()));
    assert!(
        !pid_exists(deploy.summary.child_pid as i32),
        "the server's pid {} is still there",
        deploy.summary.child_pid
    );
    deploy
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_sequence_loses_nothing() {
    let config = config();
    let deploy = deploy(DeployCase::Full, &config).await;
    let summary = &deploy.summary;
    let failures: Vec<_> = deploy
        .samples
        .iter()
        .filter(|sample| sample.outcome != "ok")
        .collect();
    assert!(failures.is_empty(), "failed requests: {failures:#?}");
    assert_eq!(summary.exit_code, 0, "{summary:#?}");
    assert!(!summary.killed_by_orchestrator && !summary.hit_deadline);
    assert_eq!(summary.in_flight_completed, config.slow_requests as u64);
    assert_eq!(summary.streams_ended_cleanly, config.streams as u64);
    assert_eq!(
        summary.in_flight_with_connection_close,
        config.slow_requests as u64
    );
    // The balancer routed to the server during the drain, so there were
    // writes to lose; none was.
    assert!(summary.acknowledged_writes > 5, "{summary:#?}");
    assert_eq!(summary.rows_present, summary.acknowledged_writes);
    assert_eq!(summary.lost_writes, 0);
    assert!(summary.db_closed_after_last_request, "{summary:#?}");
    assert!(summary.db_closed_ms >= summary.last_response_ms);
    // The order: readiness, then the balancer leaves, then stop accepting.
    assert!(
        summary.not_ready_ms < summary.stop_accepting_ms,
        "{summary:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exiting_at_once_fails_requests() {
    let deploy = deploy(DeployCase::ExitAtOnce, &config()).await;
    let summary = &deploy.summary;
    assert_eq!(summary.exit, "signal 15 (SIGTERM)");
    assert_eq!(summary.exit_code, 143);
    // Every long request in flight at SIGTERM was cut, and so was every stream.
    assert_eq!(summary.in_flight_completed, 0, "{summary:#?}");
    assert_eq!(summary.streams_ended_cleanly, 0, "{summary:#?}");
    assert!(summary.failed >= summary.in_flight_at_sigterm + summary.streams);
    assert!(summary.reset >= summary.in_flight_at_sigterm);
    // Committed rows survive a kill: the failure is in the requests.
    assert_eq!(summary.lost_writes, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_alone_waits_for_streams_until_sigkill() {
    let config = config();
    let deploy = deploy(DeployCase::GracefulOnly, &config).await;
    let summary = &deploy.summary;
    // In-flight requests finish: that part of graceful shutdown works...
    assert_eq!(summary.in_flight_completed, config.slow_requests as u64);
    // ...but nothing tells the streams to end, so the process waits for them
    // until the orchestrator's SIGKILL, and they are cut.
    // hyper itself marks those responses `Connection: close` (this variant
    // has no middleware that would).
    assert_eq!(
        summary.in_flight_with_connection_close,
        config.slow_requests as u64
    );
    assert!(summary.killed_by_orchestrator, "{summary:#?}");
    assert_eq!(summary.exit_code, 137);
    assert_eq!(summary.streams_ended_cleanly, 0);
    assert!(summary.time_to_exit_ms >= config.termination_grace_ms as f64);
    assert!(!summary.db_closed_after_last_request);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_never_leaves_ends_at_the_hard_deadline() {
    // Stated margin: the process must be gone within 750 ms after its
    // deadline (scheduling on a loaded machine, process teardown).
    const MARGIN_MS: f64 = 750.0;
    let config = config();
    let deploy = deploy(DeployCase::FullStuckStream, &config).await;
    let summary = &deploy.summary;
    assert!(summary.hit_deadline, "{summary:#?}");
    assert_eq!(summary.exit_code, 1);
    assert!(!summary.killed_by_orchestrator);
    let deadline = config.hard_deadline_ms as f64;
    assert!(
        summary.time_to_exit_ms >= deadline && summary.time_to_exit_ms <= deadline + MARGIN_MS,
        "exited {} ms after SIGTERM; deadline {deadline} ms",
        summary.time_to_exit_ms
    );
    // The polite streams left on goaway; only the stubborn one was cut.
    assert_eq!(summary.streams, config.streams as u64 + 1);
    assert_eq!(summary.streams_ended_cleanly, config.streams as u64);
    assert_eq!(summary.in_flight_completed, config.slow_requests as u64);
    assert_eq!(summary.lost_writes, 0);
}
