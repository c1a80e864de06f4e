//! Graceful shutdown, with the shutdown lab's probe: it starts the reader's
//! command, sends traffic, sends SIGTERM, and reports readiness, in-flight
//! requests, refusals and the exit against the grace period.

use anyhow::Result;
use lab_shutdown_drain::probe::{ShutdownProbeConfig, probe_with};

use super::Patient;
use crate::{
    finding::{Check, Finding},
    options::Target,
};

pub async fn shutdown(patient: &Patient) -> Result<Finding> {
    let check = Check::Shutdown;
    let Target::Command { port, command } = &patient.options.target else {
        return Ok(Finding::skip(
            check,
            "give the command that starts the server (--port P -- COMMAND) to check its shutdown",
        ));
    };
    let options = &patient.options;
    let config = ShutdownProbeConfig {
        port: *port,
        path: options.paths.fast.clone(),
        ready_path: options.paths.ready.clone(),
        // In flight at SIGTERM: work that takes a while but ends (the slow
        // path may never end, and a deadline's 503 is not a completion).
        slow_path: options
            .paths
            .heavy
            .clone()
            .unwrap_or_else(|| options.paths.fast.clone()),
        in_flight: 3,
        grace: options.grace,
        start_timeout: std::time::Duration::from_secs(10),
        warmup: std::time::Duration::from_millis(500),
        interval: std::time::Duration::from_millis(20),
        command: command.clone(),
    };
    let report = probe_with(&config, &patient.connector).await?;
    let exit_s = report.time_to_exit_ms / 1000.0;
    let measured = format!(
        "exit {} after {exit_s:.2} s; {}/{} in flight completed",
        report.exit, report.in_flight_completed, report.in_flight
    );
    // The verdict's sentences, but its last line ("verdict: ...") is ours.
    let why: Vec<&str> = report
        .verdict
        .lines()
        .filter(|line| !line.starts_with("verdict:"))
        .collect();
    let readiness_first = report.readiness_before_refusing;
    Ok(if report.clean && readiness_first {
        Finding::pass(check, measured, Some(exit_s), why.join("; "))
    } else if report.clean {
        Finding::warn(
            check,
            measured,
            Some(exit_s),
            format!(
                "{}; readiness did not turn 503 before it refused connections",
                why.join("; ")
            ),
        )
    } else {
        Finding::fail(check, measured, Some(exit_s), why.join("; "))
    })
}
