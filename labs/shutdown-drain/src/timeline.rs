//! A deploy's data: which deploy it was, what the orchestrator and the server
//! left behind, and its requests on one timeline with what they add up to:
//! times made relative to the start of traffic, the readiness lane, and the
//! summary (failed requests by kind, how the process ended, lost writes).
//! `deploy` runs a deploy and hands its evidence here.

use anyhow::Result;
use lab_kit::{Output, Series, child::Ended};
use serde::Serialize;

use crate::{
    balancer::Transition,
    clients::{Outcome, RequestSample},
    events::{Event, first},
    server::ShutdownStyle,
};

lab_kit::series! {
    /// The four deploys the lab compares.
    pub enum DeployCase {
        /// No SIGTERM handler.
        ExitAtOnce => "exit-at-once",
        /// `with_graceful_shutdown` alone.
        GracefulOnly => "graceful-only",
        /// The full sequence.
        Full => "full",
        /// The full sequence, and one stream client that ignores `goaway`.
        FullStuckStream => "full-stuck-stream",
    }
}

impl DeployCase {
    /// How the server being deployed handles SIGTERM.
    pub fn style(self) -> ShutdownStyle {
        match self {
            DeployCase::ExitAtOnce => ShutdownStyle::ExitAtOnce,
            DeployCase::GracefulOnly => ShutdownStyle::GracefulOnly,
            DeployCase::Full | DeployCase::FullStuckStream => ShutdownStyle::Full,
        }
    }
}

/// What the server left behind: its event log, the rows in its database.
pub struct ServerEvidence {
    pub events: Vec<Event>,
    pub written: Vec<i64>,
    pub child_pid: i32,
}

/// How the orchestrator's part ended.
pub struct ProcessEnding {
    pub sigterm_at: f64,
    pub exit_at: f64,
    pub ended: Ended,
    pub killed_by_orchestrator: bool,
}

/// Everything one deploy produced.
#[derive(Debug, Clone)]
pub struct Deploy {
    pub case: DeployCase,
    /// In start order, times in ms from the start of traffic.
    pub samples: Vec<RequestSample>,
    pub summary: DeploySummary,
    /// The readiness lane: from the balancer taking the server out to the end.
    pub not_ready_span: (f64, f64),
}

/// What one deploy cost, and how the server ended.
#[derive(Debug, Clone, Serialize)]
pub struct DeploySummary {
    pub shutdown_style: &'static str,
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
    pub refused: u64,
    pub reset: u64,
    pub bad_gateway: u64,
    pub unavailable: u64,
    /// 500s, timeouts and errors.
    pub other_failures: u64,
    /// Requests served by the server being deployed (any outcome).
    pub to_server: u64,
    pub in_flight_at_sigterm: u64,
    pub in_flight_completed: u64,
    /// Long requests whose response told the balancer `Connection: close`.
    pub in_flight_with_connection_close: u64,
    pub streams: u64,
    /// Streams that ended without an error (left on goaway or ended by the server).
    pub streams_ended_cleanly: u64,
    /// `/work` requests the server being deployed answered 200 (each one a
    /// committed row, by the server's contract).
    pub acknowledged_writes: u64,
    /// Acknowledged writes found in the database file after the process ended.
    pub rows_present: u64,
    pub lost_writes: u64,
    /// "0", "1", "signal 15 (SIGTERM)", "signal 9 (SIGKILL)".
    pub exit: String,
    /// As a shell reports it (128 + signal).
    pub exit_code: i64,
    pub killed_by_orchestrator: bool,
    pub hit_deadline: bool,
    /// Times in ms from the start of traffic.
    pub sigterm_ms: f64,
    /// When the balancer took the server out.
    pub not_ready_ms: f64,
    /// When the server stopped accepting (its own log; for a process that
    /// never handles SIGTERM, the moment it died).
    pub stop_accepting_ms: f64,
    pub exit_ms: f64,
    pub time_to_exit_ms: f64,
    /// From SIGTERM to the balancer taking the server out.
    pub noticed_after_ms: f64,
    /// The server's own log: when it closed the database (-1: never did).
    pub db_closed_ms: f64,
    /// The server's own log: when its last response left the handler.
    pub last_response_ms: f64,
    /// Closed, with no request in flight and after the last response.
    pub db_closed_after_last_request: bool,
    pub child_pid: i64,
}

/// Puts a deploy's requests (CLOCK_MONOTONIC times) on the timeline that
/// starts with traffic at `span.0` and ends at `span.1`, and sums them up.
pub fn assemble(
    case: DeployCase,
    mut samples: Vec<RequestSample>,
    ending: &ProcessEnding,
    evidence: &ServerEvidence,
    transitions: &[Transition],
    (t0, run_end): (f64, f64),
) -> Deploy {
    let relative = |at: f64| at - t0;
    let not_ready_at = transitions
        .iter()
        .find(|change| change.backend == 0 && !change.ready && change.t_ms >= ending.sigterm_at)
        .map_or(run_end, |change| change.t_ms);
    samples.sort_by(|left, right| left.start_ms.total_cmp(&right.start_ms));
    for sample in &mut samples {
        sample.start_ms = relative(sample.start_ms);
        sample.end_ms = relative(sample.end_ms);
    }
    let summary = summarize(case, &samples, ending, evidence, (t0, not_ready_at));
    Deploy {
        case,
        samples,
        summary,
        not_ready_span: (relative(not_ready_at), relative(run_end)),
    }
}

/// The counts of one deploy, and the server's own log on its timeline
/// (`t0` is the start of traffic; times are CLOCK_MONOTONIC ms).
fn summarize(
    case: DeployCase,
    samples: &[RequestSample],
    ending: &ProcessEnding,
    evidence: &ServerEvidence,
    (t0, not_ready_at): (f64, f64),
) -> DeploySummary {
    let relative = |at: f64| at - t0;
    let events = &evidence.events;
    let event_at = |name: &str| first(events, name).map(|event| event.t_ms);
    let db_closed = event_at("db_closed");
    // The value of `last_response` is the time itself (0: no response yet).
    let last_response = first(events, "last_response")
        .map(|event| event.value)
        .filter(|&value| value > 0.0);
    let in_flight_at_close = first(events, "db_closed").map(|event| event.value);
    let count = |predicate: &dyn Fn(&RequestSample) -> bool| {
        samples.iter().filter(|sample| predicate(sample)).count() as u64
    };
    let slow_ok = |sample: &RequestSample| sample.kind == "slow" && sample.result == Outcome::Ok;
    let acknowledged: Vec<u64> = samples
        .iter()
        .filter(|sample| sample.backend == 0)
        .filter_map(|sample| sample.acknowledged_id)
        .collect();
    let rows_present = acknowledged
        .iter()
        .filter(|id| evidence.written.contains(&(**id as i64)))
        .count() as u64;
    DeploySummary {
        shutdown_style: case.style().name(),
        requests: samples.len() as u64,
        ok: count(&|sample| sample.result == Outcome::Ok),
        failed: count(&|sample| sample.result.failed()),
        refused: count(&|sample| sample.result == Outcome::Refused),
        reset: count(&|sample| sample.result == Outcome::Reset),
        bad_gateway: count(&|sample| sample.result == Outcome::BadGateway),
        unavailable: count(&|sample| sample.result == Outcome::Unavailable),
        other_failures: count(&|sample| {
            matches!(
                sample.result,
                Outcome::ServerError | Outcome::Timeout | Outcome::Error
            )
        }),
        to_server: count(&|sample| sample.backend == 0),
        in_flight_at_sigterm: count(&|sample| sample.kind == "slow"),
        in_flight_completed: count(&slow_ok),
        in_flight_with_connection_close: count(&|sample| slow_ok(sample) && sample.upstream_close),
        streams: count(&|sample| sample.kind == "stream"),
        streams_ended_cleanly: count(&|sample| {
            sample.kind == "stream" && sample.result == Outcome::Ok
        }),
        acknowledged_writes: acknowledged.len() as u64,
        rows_present,
        lost_writes: acknowledged.len() as u64 - rows_present,
        exit: ending.ended.describe(),
        exit_code: i64::from(ending.ended.shell_code()),
        killed_by_orchestrator: ending.killed_by_orchestrator,
        hit_deadline: event_at("deadline").is_some(),
        sigterm_ms: relative(ending.sigterm_at),
        not_ready_ms: relative(not_ready_at),
        stop_accepting_ms: relative(event_at("stop_accepting").unwrap_or(ending.exit_at)),
        exit_ms: relative(ending.exit_at),
        time_to_exit_ms: ending.exit_at - ending.sigterm_at,
        noticed_after_ms: not_ready_at - ending.sigterm_at,
        db_closed_ms: db_closed.map_or(-1.0, relative),
        last_response_ms: last_response.map_or(-1.0, relative),
        db_closed_after_last_request: match (db_closed, last_response, in_flight_at_close) {
            (Some(closed), Some(last), Some(in_flight)) => closed >= last && in_flight == 0.0,
            _ => false,
        },
        child_pid: i64::from(evidence.child_pid),
    }
}

/// Writes one deploy's records: a timeline sample per request, the
/// readiness lane, and the summary.
///
/// Timeline series are `<deploy>/<kind>` (work, slow, stream) and
/// `<deploy>/not-ready`: every deploy has all four by construction, so a
/// chart can list them whatever the run's outcomes were. The outcome is the
/// sample's row.
pub fn write_deploy(deploy: &Deploy, out: &mut Output) -> Result<()> {
    let name = deploy.case.series();
    for sample in &deploy.samples {
        out.write_sample(&format!("{name}/{}", sample.kind), sample)?;
    }
    #[derive(Serialize)]
    struct Lane {
        start_ms: f64,
        end_ms: f64,
        row: f64,
    }
    out.write_sample(
        &format!("{name}/not-ready"),
        &Lane {
            start_ms: deploy.not_ready_span.0,
            end_ms: deploy.not_ready_span.1,
            row: -1.0,
        },
    )?;
    out.write_summary(&name, &deploy.summary)
}
