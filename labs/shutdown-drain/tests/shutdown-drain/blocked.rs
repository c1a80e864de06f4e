//! SIGTERM while inline reports hold both of the server's worker threads:
//! the full sequence cannot start until a worker is free, so readiness
//! answers 503 only after the report; a report that outlasts the grace
//! period holds off the handler, the server's own hard deadline and the exit
//! alike, and the orchestrator's SIGKILL ends it with the reports lost.
//! Margins: a busy machine makes the server later, never earlier.

use lab_kit::{Lab, Mode};
use lab_shutdown_drain::{
    AtSigterm, Config, child::pid_exists, probe_own_server, server::ShutdownStyle,
};

const LAB: &str = env!("CARGO_BIN_EXE_lab-shutdown-drain");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_runtime_answers_readiness_late_and_a_long_report_meets_sigkill() {
    let mut config = Config::for_mode(Mode::Quick);
    config.server_exe = LAB.into();
    let reports = |ms: u64| AtSigterm {
        path: format!("/report?ms={ms}"),
        count: config.blocking_reports,
    };

    let within = probe_own_server(
        ShutdownStyle::Full,
        &config,
        &reports(config.report_within_grace_ms),
    )
    .await
    .expect("the probe runs");
    assert!(!pid_exists(within.child_pid as i32));
    // The probe sends SIGTERM 50 ms after the reports: the rest of the
    // report must pass before the first 503 can be written.
    let rest = (config.report_within_grace_ms - 50) as f64;
    assert!(
        within.readiness_503_answered_after_ms >= 0.75 * rest,
        "{within:?}"
    );
    assert!(!within.killed_after_grace, "{within:?}");
    assert_eq!(within.in_flight_completed, within.in_flight, "{within:?}");

    let past = probe_own_server(
        ShutdownStyle::Full,
        &config,
        &reports(config.report_past_grace_ms),
    )
    .await
    .expect("the probe runs");
    assert!(!pid_exists(past.child_pid as i32));
    assert!(past.killed_after_grace, "{past:?}");
    assert_eq!(past.in_flight_completed, 0, "{past:?}");
    assert_eq!(past.after_sigterm_ok, 0, "{past:?}");
    assert_eq!(past.readiness_503_answered_after_ms, -1.0, "{past:?}");
}
