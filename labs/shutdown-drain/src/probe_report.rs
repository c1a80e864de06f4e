//! What the shutdown probe saw, as numbers ([`ShutdownProbeReport`]) and as
//! sentences (its verdict): from the requests it timed around one SIGTERM.

use std::time::Duration;

use lab_kit::child::Ended;
use serde::Serialize;

/// What the reader asked of the probe, as the report repeats it (from the
/// probe's command line, `probe::ShutdownProbeConfig`).
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    pub command: &'a [String],
    pub port: u16,
    pub ready_path: &'a str,
    /// The orchestrator's grace period.
    pub grace: Duration,
}

/// What the probe saw. Times in ms after SIGTERM unless named otherwise; -1
/// where something never happened.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ShutdownProbeReport {
    pub command: String,
    pub port: u16,
    pub child_pid: i64,
    /// From start to the first accepted connection.
    pub listened_after_ms: f64,
    /// `ready_path`'s status before SIGTERM (-1: no answer).
    pub ready_status_before: i64,
    /// First readiness poll answering 503 after SIGTERM, by when it was sent.
    pub readiness_503_after_ms: f64,
    /// The first 503 answer's arrival after SIGTERM: later than the above
    /// when the server could not answer at once (a blocked runtime).
    pub readiness_503_answered_after_ms: f64,
    /// First refused connection after SIGTERM.
    pub refused_after_ms: f64,
    /// Readiness said 503 before any connection was refused: a balancer
    /// polling it could leave in time.
    pub readiness_before_refusing: bool,
    pub in_flight: u64,
    pub in_flight_completed: u64,
    pub in_flight_failed: u64,
    pub after_sigterm_requests: u64,
    pub after_sigterm_ok: u64,
    pub after_sigterm_503: u64,
    pub after_sigterm_refused: u64,
    pub after_sigterm_reset: u64,
    pub after_sigterm_other: u64,
    /// "0", "1", "signal 15 (SIGTERM)", "signal 9 (SIGKILL)".
    pub exit: String,
    pub exit_code: i64,
    pub time_to_exit_ms: f64,
    /// Still running at the end of the grace period, so killed.
    pub killed_after_grace: bool,
    pub clean: bool,
    pub verdict: String,
}

/// How one probe request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Any status below 500.
    Ok,
    Unavailable,
    OtherStatus,
    Refused,
    /// Connection closed or reset before a whole response.
    Reset,
    Timeout,
}

/// What the probe recorded around one SIGTERM, before any counting.
/// Times are CLOCK_MONOTONIC ms.
pub struct Observed {
    pub child_pid: i32,
    pub listened_after_ms: f64,
    pub ready_status_before: i64,
    /// Readiness polls: (start, outcome).
    pub polls: Vec<(f64, Seen)>,
    /// The same polls: (when the outcome arrived, outcome).
    pub polls_answered: Vec<(f64, Seen)>,
    /// Steady traffic: (start, outcome).
    pub traffic: Vec<(f64, Seen)>,
    pub in_flight: Vec<Seen>,
    pub sigterm_at: f64,
    pub exit_at: f64,
    pub ended: Ended,
    pub killed_after_grace: bool,
}

impl ShutdownProbeReport {
    /// Counts what `seen` recorded and writes the verdict.
    pub fn from_observed(seen: &Observed, config: Asked<'_>) -> ShutdownProbeReport {
        let sigterm_at = seen.sigterm_at;
        let after = |records: &[(f64, Seen)], wanted: Seen| {
            records
                .iter()
                .filter(|(at, outcome)| *at >= sigterm_at && *outcome == wanted)
                .map(|(at, _)| at - sigterm_at)
                .fold(f64::INFINITY, f64::min)
        };
        let readiness_503 = after(&seen.polls, Seen::Unavailable);
        let readiness_503_answered = after(&seen.polls_answered, Seen::Unavailable);
        let refused = after(&seen.polls, Seen::Refused).min(after(&seen.traffic, Seen::Refused));
        let after_sigterm: Vec<Seen> = seen
            .traffic
            .iter()
            .filter(|(at, _)| *at >= sigterm_at)
            .map(|(_, outcome)| *outcome)
            .collect();
        let tally = |wanted: &[Seen]| {
            after_sigterm
                .iter()
                .filter(|outcome| wanted.contains(outcome))
                .count() as u64
        };
        let in_flight = seen.in_flight.len() as u64;
        let completed = seen
            .in_flight
            .iter()
            .filter(|&&outcome| outcome == Seen::Ok)
            .count() as u64;
        let never = |millis: f64| if millis.is_finite() { millis } else { -1.0 };
        let mut report = ShutdownProbeReport {
            command: config.command.join(" "),
            port: config.port,
            child_pid: i64::from(seen.child_pid),
            listened_after_ms: seen.listened_after_ms,
            ready_status_before: seen.ready_status_before,
            readiness_503_after_ms: never(readiness_503),
            readiness_503_answered_after_ms: never(readiness_503_answered),
            refused_after_ms: never(refused),
            readiness_before_refusing: readiness_503.is_finite() && readiness_503 < refused,
            in_flight,
            in_flight_completed: completed,
            in_flight_failed: in_flight - completed,
            after_sigterm_requests: after_sigterm.len() as u64,
            after_sigterm_ok: tally(&[Seen::Ok]),
            after_sigterm_503: tally(&[Seen::Unavailable]),
            after_sigterm_refused: tally(&[Seen::Refused]),
            after_sigterm_reset: tally(&[Seen::Reset]),
            after_sigterm_other: tally(&[Seen::OtherStatus, Seen::Timeout]),
            exit: seen.ended.describe(),
            exit_code: i64::from(seen.ended.shell_code()),
            time_to_exit_ms: seen.exit_at - sigterm_at,
            killed_after_grace: seen.killed_after_grace,
            clean: false,
            verdict: String::new(),
        };
        report.clean = seen.ended == Ended::Code(0)
            && !seen.killed_after_grace
            && report.in_flight_failed == 0;
        report.verdict = verdict(&report, config);
        report
    }
}

/// The report as sentences, one a line.
fn verdict(report: &ShutdownProbeReport, config: Asked<'_>) -> String {
    let mut lines = Vec::new();
    lines.push(match report.ready_status_before {
        200 => format!("{} answered 200 before SIGTERM", config.ready_path),
        -1 => format!("{} did not answer before SIGTERM", config.ready_path),
        status => format!(
            "{} answered {status} before SIGTERM: no readiness endpoint there?",
            config.ready_path
        ),
    });
    lines.push(
        match (report.readiness_503_after_ms, report.refused_after_ms) {
            (ready, refused) if ready >= 0.0 && (refused < 0.0 || ready < refused) => format!(
                "readiness turned 503 {ready:.0} ms after SIGTERM{}",
                if refused >= 0.0 {
                    format!(", {:.0} ms before the first refused connection", refused - ready)
                } else {
                    String::new()
                }
            ),
            (_, refused) if refused >= 0.0 => format!(
                "connections were refused {refused:.0} ms after SIGTERM with no 503 from readiness first: a balancer finds out only by failing requests"
            ),
            _ => "readiness never answered 503 and no connection was refused".into(),
        },
    );
    lines.push(format!(
        "{} of {} requests in flight at SIGTERM completed",
        report.in_flight_completed, report.in_flight
    ));
    lines.push(format!(
        "after SIGTERM: {} requests, {} ok, {} answered 503, {} refused, {} reset, {} other failures",
        report.after_sigterm_requests,
        report.after_sigterm_ok,
        report.after_sigterm_503,
        report.after_sigterm_refused,
        report.after_sigterm_reset,
        report.after_sigterm_other
    ));
    lines.push(if report.killed_after_grace {
        format!(
            "did not exit within the {:.0} ms grace period after SIGTERM (it ignored it or never finished draining): killed with SIGKILL",
            config.grace.as_secs_f64() * 1000.0
        )
    } else if report.exit_code == 128 + libc::SIGTERM as i64 {
        format!(
            "ended by SIGTERM itself after {:.0} ms: with no handler that is the signal's default action and nothing drains; a handler that drains first and then raises the signal again (uvicorn's does) ends the same way, so count the requests in flight above",
            report.time_to_exit_ms
        )
    } else {
        format!(
            "exited with {} {:.0} ms after SIGTERM",
            report.exit, report.time_to_exit_ms
        )
    });
    lines.push(if report.clean {
        "verdict: clean shutdown".into()
    } else {
        "verdict: requests or the exit were not clean (see above)".into()
    });
    lines.join("\n")
}
