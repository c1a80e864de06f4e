//! The measured experiment: one service, a dependency that turns slow for a
//! while, and three kubelet-style probers watching the service at once.
//!
//! - liveness on `/livez` (answers from the process),
//! - liveness on `/readyz` (queries the dependency: a `SELECT 1` liveness),
//! - readiness on `/readyz`, which decides whether the pod is routed to.
//!
//! Every probe is a real GET on a fresh loopback connection, timed; the
//! probers' decisions (a restart the kubelet would make, the pod leaving or
//! rejoining rotation) are recorded when they happen.

use std::{sync::Arc, time::Duration};

use anyhow::{Context, Result};
use lab_kit::{Output, Series, clock::monotonic_ms, net::AbortOnDrop, server::spawn_axum};
use serde::Serialize;
use tokio::time::Instant;

use crate::{
    Config, LivenessCheck,
    app::{ServiceState, app},
    dependency::{self, SlowWindow},
    kubelet::{KubeletProbe, ProbeKind, ProbeLog, run_prober},
};

/// One of the experiment's probers: what it probes, and what it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbedCheck {
    Liveness(LivenessCheck),
    /// Readiness on `/readyz`, which queries the dependency.
    Readiness,
}

impl ProbedCheck {
    pub const ALL: [ProbedCheck; 3] = [
        ProbedCheck::Liveness(LivenessCheck::Process),
        ProbedCheck::Liveness(LivenessCheck::Database),
        ProbedCheck::Readiness,
    ];

    /// The probe as a pod spec would declare it.
    pub fn probe(self, config: &Config) -> KubeletProbe {
        let millis = Duration::from_millis;
        match self {
            ProbedCheck::Liveness(check) => KubeletProbe {
                kind: ProbeKind::Liveness,
                path: match check {
                    LivenessCheck::Process => "/livez",
                    LivenessCheck::Database => "/readyz",
                },
                period: millis(config.liveness_period_ms),
                timeout: millis(config.liveness_timeout_ms),
                failure_threshold: config.liveness_failure_threshold,
                success_threshold: 1,
            },
            ProbedCheck::Readiness => KubeletProbe {
                kind: ProbeKind::Readiness,
                path: "/readyz",
                period: millis(config.readiness_period_ms),
                timeout: millis(config.readiness_timeout_ms),
                failure_threshold: config.readiness_failure_threshold,
                success_threshold: config.readiness_success_threshold,
            },
        }
    }

    /// Its row on the timeline chart (the dependency's is [`DEPENDENCY_ROW`]).
    pub fn row(self) -> f64 {
        match self {
            ProbedCheck::Liveness(LivenessCheck::Process) => 0.0,
            ProbedCheck::Liveness(LivenessCheck::Database) => 1.0,
            ProbedCheck::Readiness => 2.0,
        }
    }
}

impl Series for ProbedCheck {
    fn series(&self) -> String {
        match self {
            ProbedCheck::Liveness(check) => check.series(),
            ProbedCheck::Readiness => "readiness-checks-db".to_string(),
        }
    }
}

/// The dependency's row on the timeline chart.
pub const DEPENDENCY_ROW: f64 = 3.0;

/// One probe on the timeline (series `probe-ok` or `probe-failed`), or a span
/// (`not-routed`, `dependency-slow`). Times in ms from the first probe.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineSpan {
    /// The prober's series, or `dependency`.
    pub check: String,
    pub start_ms: f64,
    pub end_ms: f64,
    pub row: f64,
}

/// What a liveness prober decided.
#[derive(Debug, Clone, Serialize)]
pub struct LivenessSummary {
    pub path: &'static str,
    pub probes: u64,
    pub failed_probes: u64,
    pub restarts: u64,
    /// When the kubelet would have restarted the container (ms from the first probe).
    pub restarts_at_ms: Vec<f64>,
    /// From the dependency turning slow to the first restart (-1: none).
    pub first_restart_after_ms: f64,
}

/// What the readiness prober decided. Times in ms.
#[derive(Debug, Clone, Serialize)]
pub struct ReadinessSummary {
    pub path: &'static str,
    pub probes: u64,
    pub failed_probes: u64,
    /// Times the pod left rotation.
    pub left_rotation: u64,
    /// From the dependency turning slow to the pod out of rotation (-1: never).
    pub stopped_routing_after_ms: f64,
    /// From the dependency recovering to the pod back in rotation (-1: never).
    pub started_routing_after_ms: f64,
    /// The latest the pod can leave: `failure_threshold` periods plus a timeout.
    pub stop_bound_ms: f64,
    /// The latest it can come back: `success_threshold` periods plus a timeout.
    pub start_bound_ms: f64,
    pub not_routed_ms: f64,
}

/// The dependency's incident, on the same clock.
#[derive(Debug, Clone, Serialize)]
pub struct DependencySummary {
    pub slow_from_ms: f64,
    pub slow_until_ms: f64,
    pub slow_for_ms: f64,
    pub slow_query_ms: f64,
}

/// Runs the experiment and writes its records.
pub async fn run(config: &Config, out: &mut Output) -> Result<()> {
    // The probers start a moment from now, once both servers listen; every
    // time in the records counts from there.
    let lead = Duration::from_millis(100);
    let (start, t0_ms) = (Instant::now() + lead, monotonic_ms() + 100.0);
    let millis = Duration::from_millis;
    let window = SlowWindow {
        from: start + millis(config.dependency_slow_from_ms),
        until: start + millis(config.dependency_slow_until_ms),
        slow: millis(config.slow_query_ms),
    };
    let dependency = dependency::start(window).await?;
    let query_limit = millis(4 * config.slow_query_ms);
    let state = ServiceState::new(dependency.url("/query"), query_limit)?;
    let service = spawn_axum(app(Arc::new(state))).await?;
    let until = start + millis(config.duration_ms);
    let probers: Vec<(ProbedCheck, AbortOnDrop<Result<ProbeLog>>)> = ProbedCheck::ALL
        .into_iter()
        .map(|check| {
            let prober = run_prober(check.probe(config), service.url(""), start, until);
            (check, AbortOnDrop::spawn(prober))
        })
        .collect();
    // Each probe ends within its timeout: the bound is a backstop.
    let bound = lead + millis(config.duration_ms) + Duration::from_secs(5);
    let mut logs = Vec::new();
    for (check, prober) in probers {
        let log = prober
            .join_within(bound)
            .await
            .with_context(|| format!("the {} prober did not finish", check.series()))??;
        logs.push((check, log));
    }
    drop(service);
    drop(dependency);

    write_timeline(config, &logs, t0_ms, out)?;
    for (check, log) in &logs {
        let relative = |at: f64| at - t0_ms;
        match check {
            ProbedCheck::Liveness(_) => out.write_summary(
                &check.series(),
                &liveness_summary(config, *check, log, relative),
            )?,
            ProbedCheck::Readiness => {
                out.write_summary(&check.series(), &readiness_summary(config, log, relative))?
            }
        }
    }
    let (slow_from, slow_until) = (
        config.dependency_slow_from_ms as f64,
        config.dependency_slow_until_ms as f64,
    );
    out.write_summary(
        "dependency",
        &DependencySummary {
            slow_from_ms: slow_from,
            slow_until_ms: slow_until,
            slow_for_ms: slow_until - slow_from,
            slow_query_ms: config.slow_query_ms as f64,
        },
    )?;
    Ok(())
}

/// Every probe as a segment on its prober's row, the dependency's slow
/// window, and each time the pod was out of rotation.
fn write_timeline(
    config: &Config,
    logs: &[(ProbedCheck, ProbeLog)],
    t0_ms: f64,
    out: &mut Output,
) -> Result<()> {
    let relative = |at: f64| at - t0_ms;
    for (check, log) in logs {
        for attempt in &log.attempts {
            let series = if attempt.passed {
                "probe-ok"
            } else {
                "probe-failed"
            };
            out.write_sample(
                series,
                &TimelineSpan {
                    check: check.series(),
                    start_ms: relative(attempt.start_ms),
                    end_ms: relative(attempt.end_ms),
                    row: check.row(),
                },
            )?;
        }
        for (left, back) in out_of_rotation(log, relative, config.duration_ms as f64) {
            let span = TimelineSpan {
                check: check.series(),
                start_ms: left,
                end_ms: back,
                row: check.row(),
            };
            out.write_sample("not-routed", &span)?;
        }
    }
    out.write_sample(
        "dependency-slow",
        &TimelineSpan {
            check: "dependency".into(),
            start_ms: config.dependency_slow_from_ms as f64,
            end_ms: config.dependency_slow_until_ms as f64,
            row: DEPENDENCY_ROW,
        },
    )
}

/// The spans a readiness prober had the pod out of rotation, (left, back),
/// in ms from the first probe; one still open at `end` ends there.
pub(crate) fn out_of_rotation(
    log: &ProbeLog,
    relative: impl Fn(f64) -> f64,
    end: f64,
) -> Vec<(f64, f64)> {
    let mut spans = Vec::new();
    let mut left_at = None;
    for &(at, routed) in &log.routing_changes {
        match (routed, left_at) {
            (false, None) => left_at = Some(relative(at)),
            (true, Some(left)) => {
                spans.push((left, relative(at)));
                left_at = None;
            }
            _ => {}
        }
    }
    spans.extend(left_at.map(|left| (left, end.max(left))));
    spans
}

fn liveness_summary(
    config: &Config,
    check: ProbedCheck,
    log: &ProbeLog,
    relative: impl Fn(f64) -> f64,
) -> LivenessSummary {
    let restarts_at_ms: Vec<f64> = log.restarts_ms.iter().map(|&at| relative(at)).collect();
    let slow_from = config.dependency_slow_from_ms as f64;
    LivenessSummary {
        path: check.probe(config).path,
        probes: log.attempts.len() as u64,
        failed_probes: failed(log),
        restarts: restarts_at_ms.len() as u64,
        first_restart_after_ms: restarts_at_ms.first().map_or(-1.0, |at| at - slow_from),
        restarts_at_ms,
    }
}

fn readiness_summary(
    config: &Config,
    log: &ProbeLog,
    relative: impl Fn(f64) -> f64,
) -> ReadinessSummary {
    let probe = ProbedCheck::Readiness.probe(config);
    let changes: Vec<(f64, bool)> = log
        .routing_changes
        .iter()
        .map(|&(at, routed)| (relative(at), routed))
        .collect();
    // The first change of this direction at or after `after`, in ms after it.
    let first = |wanted: bool, after: f64| {
        changes
            .iter()
            .find(|&&(at, routed)| routed == wanted && at >= after)
            .map_or(-1.0, |&(at, _)| at - after)
    };
    let period = probe.period.as_secs_f64() * 1000.0;
    let timeout = probe.timeout.as_secs_f64() * 1000.0;
    let not_routed_ms = out_of_rotation(log, &relative, config.duration_ms as f64)
        .iter()
        .map(|(left, back)| back - left)
        .sum();
    ReadinessSummary {
        path: probe.path,
        probes: log.attempts.len() as u64,
        failed_probes: failed(log),
        left_rotation: changes.iter().filter(|(_, routed)| !routed).count() as u64,
        stopped_routing_after_ms: first(false, config.dependency_slow_from_ms as f64),
        started_routing_after_ms: first(true, config.dependency_slow_until_ms as f64),
        stop_bound_ms: f64::from(probe.failure_threshold) * period + timeout,
        start_bound_ms: f64::from(probe.success_threshold) * period + timeout,
        not_routed_ms,
    }
}

fn failed(log: &ProbeLog) -> u64 {
    log.attempts
        .iter()
        .filter(|attempt| !attempt.passed)
        .count() as u64
}
