//! What a setup's run observed: the /health answers and lag-probe wake-ups
//! on one timeline, and the summary the chapter's tables and marks read.

use std::time::Duration;

use anyhow::{Result, ensure};
use lab_kit::stats::{Latencies, percentile};
use serde::Serialize;

use crate::{Config, handlers::Span, prober::ProbeLine, server::ServerRecord, setup::HandlerSetup};

/// Everything one setup produced.
pub struct Measured {
    pub health: Vec<HealthSample>,
    pub lag: Vec<LagPoint>,
    pub summary: HandlerSummary,
}

/// One /health answer, placed on the setup's timeline.
#[derive(Debug, Clone, Serialize)]
pub struct HealthSample {
    /// When the probe was sent, ms since the setup's prober started.
    pub t_ms: f64,
    /// How long the answer took.
    pub ms: f64,
    pub ok: bool,
}

/// One lag-probe wake-up, on the same timeline.
#[derive(Debug, Clone, Serialize)]
pub struct LagPoint {
    /// When the tick was due, ms since the setup's prober started.
    pub t_ms: f64,
    /// How late the task woke.
    pub ms: f64,
}

/// What one setup's run observed.
#[derive(Debug, Clone, Serialize)]
pub struct HandlerSummary {
    pub runtime: String,
    pub strategy: String,
    pub reports: usize,
    pub rows: usize,
    /// Rounds of `reports` run one after another, and in how many of them
    /// the slowest /health sent during the round waited at least half the
    /// round: the whole server stalled, not just one connection.
    pub rounds: usize,
    pub stalled_rounds: usize,
    /// When the first report's computation started and the last one ended,
    /// ms since the prober started (the chart marks these).
    pub report_start_ms: f64,
    pub report_end_ms: f64,
    /// When each report's computation started and ended, ms since the prober
    /// started, in time order (the two-workers chart marks
    /// every round with these).
    pub report_starts_ms: Vec<f64>,
    pub report_ends_ms: Vec<f64>,
    /// Mean time one report's computation took, as the server timed it.
    pub report_ms: f64,
    /// How long the client waited for its (first) answer: for the background
    /// job that is the 202, not the report.
    pub report_response_ms: f64,
    /// /health answers received, failed, and their latency.
    pub health_count: usize,
    pub health_failed: usize,
    pub health_p50_ms: f64,
    pub health_p99_ms: f64,
    pub health_max_ms: f64,
    pub login_max_ms: f64,
    /// The lag probe inside the server.
    pub lag_count: usize,
    pub lag_p50_ms: f64,
    pub lag_p99_ms: f64,
    pub lag_max_ms: f64,
    /// tokio-metrics, per route: polls of the /report handler future, how
    /// many were slow (longer than slow_poll_ms), and their total time.
    pub report_polls: u64,
    pub report_slow_polls: u64,
    pub report_slow_poll_ms: f64,
    pub health_slow_polls: u64,
}

pub(crate) fn summarise(
    setup: &HandlerSetup,
    config: &Config,
    origin_ms: f64,
    probes: &[ProbeLine],
    record: &ServerRecord,
    response_ms: &[f64],
    round_windows: &[(f64, f64)],
) -> Result<Measured> {
    let expected = setup.reports * round_windows.len();
    ensure!(
        record.spans.len() == expected,
        "the server ran {} of {expected} reports",
        record.spans.len()
    );
    let stalled_rounds = stalled_rounds(probes, round_windows);
    let reports = ReportTimes::of(&record.spans, origin_ms);
    let answers = Answers::of(probes, origin_ms)?;
    let health_stats = answers.latency.summary();
    let (lag, lag_sorted) = lag_points(record, origin_ms)?;

    let summary = HandlerSummary {
        runtime: setup.runtime_label(),
        strategy: setup.offload_label().into(),
        reports: setup.reports,
        rows: config.rows,
        rounds: round_windows.len(),
        stalled_rounds,
        report_start_ms: reports.start_ms,
        report_end_ms: reports.end_ms,
        report_starts_ms: reports.starts_ms,
        report_ends_ms: reports.ends_ms,
        report_ms: reports.mean_ms,
        report_response_ms: response_ms.iter().copied().fold(f64::INFINITY, f64::min),
        health_count: health_stats.count,
        health_failed: answers.health_failed,
        health_p50_ms: health_stats.p50_ms,
        health_p99_ms: health_stats.p99_ms,
        health_max_ms: health_stats.max_ms,
        login_max_ms: answers.login_max_ms,
        lag_count: lag_sorted.len(),
        lag_p50_ms: percentile(&lag_sorted, 50.0),
        lag_p99_ms: percentile(&lag_sorted, 99.0),
        lag_max_ms: lag_sorted[lag_sorted.len() - 1],
        report_polls: record.report_route.polls,
        report_slow_polls: record.report_route.slow_polls,
        report_slow_poll_ms: record.report_route.slow_poll_ms,
        health_slow_polls: record.health_route.slow_polls,
    };
    Ok(Measured {
        health: answers.health,
        lag,
        summary,
    })
}

/// Rounds in which the slowest /health sent during the round waited at
/// least half the round.
fn stalled_rounds(probes: &[ProbeLine], round_windows: &[(f64, f64)]) -> usize {
    round_windows
        .iter()
        .filter(|(start, end)| {
            let slowest = probes
                .iter()
                .filter(|probe| probe.path == "/health")
                .filter(|probe| probe.sent_ms >= *start && probe.sent_ms <= *end)
                .map(|probe| probe.ms)
                .fold(0.0, f64::max);
            slowest >= 0.5 * (end - start)
        })
        .count()
}

/// When the reports' computations ran, ms since the prober started.
struct ReportTimes {
    /// The first start and the last end.
    start_ms: f64,
    end_ms: f64,
    /// Every start and every end, in time order.
    starts_ms: Vec<f64>,
    ends_ms: Vec<f64>,
    /// Mean time one computation took.
    mean_ms: f64,
}

impl ReportTimes {
    fn of(spans: &[Span], origin_ms: f64) -> Self {
        let start = spans
            .iter()
            .map(|span| span.start_ms)
            .fold(f64::INFINITY, f64::min);
        let end = spans
            .iter()
            .map(|span| span.end_ms)
            .fold(f64::NEG_INFINITY, f64::max);
        let times = |pick: fn(&Span) -> f64| {
            let mut times: Vec<f64> = spans.iter().map(|span| pick(span) - origin_ms).collect();
            times.sort_by(f64::total_cmp);
            times
        };
        let mean_ms = spans
            .iter()
            .map(|span| span.end_ms - span.start_ms)
            .sum::<f64>()
            / spans.len() as f64;
        Self {
            start_ms: start - origin_ms,
            end_ms: end - origin_ms,
            starts_ms: times(|span| span.start_ms),
            ends_ms: times(|span| span.end_ms),
            mean_ms,
        }
    }
}

/// The prober's answers: /health on the timeline and its latency, the
/// others (login) by their slowest.
struct Answers {
    health: Vec<HealthSample>,
    latency: Latencies,
    health_failed: usize,
    login_max_ms: f64,
}

impl Answers {
    fn of(probes: &[ProbeLine], origin_ms: f64) -> Result<Self> {
        let mut health = Vec::new();
        let mut latency = Latencies::default();
        let mut login_max_ms: f64 = 0.0;
        let mut health_failed = 0;
        for probe in probes {
            let ok = probe.status == 200;
            let answer_time = Duration::from_secs_f64(probe.ms.max(0.0) / 1000.0);
            if probe.path == "/health" {
                latency.record(answer_time);
                health_failed += usize::from(!ok);
                health.push(HealthSample {
                    t_ms: probe.sent_ms - origin_ms,
                    ms: probe.ms,
                    ok,
                });
            } else {
                login_max_ms = login_max_ms.max(probe.ms);
            }
        }
        health.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
        ensure!(
            latency.len() >= 10,
            "only {} /health answers",
            latency.len()
        );
        Ok(Self {
            health,
            latency,
            health_failed,
            login_max_ms,
        })
    }
}

/// The lag probe's wake-ups from the prober's start on, and their lateness
/// sorted (never empty).
fn lag_points(record: &ServerRecord, origin_ms: f64) -> Result<(Vec<LagPoint>, Vec<f64>)> {
    let lag: Vec<LagPoint> = record
        .lag
        .iter()
        .filter(|sample| sample.due_ms >= origin_ms)
        .map(|sample| LagPoint {
            t_ms: sample.due_ms - origin_ms,
            ms: sample.late_ms,
        })
        .collect();
    let mut lag_sorted: Vec<f64> = lag.iter().map(|point| point.ms).collect();
    lag_sorted.sort_by(f64::total_cmp);
    ensure!(!lag_sorted.is_empty(), "the lag probe never woke");
    Ok((lag, lag_sorted))
}
