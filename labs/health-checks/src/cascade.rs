//! The readiness cascade, measured: three pods share one dependency that
//! fails in short blips and once for longer. Every pod's readiness probe is a
//! real kubelet-style prober on its own phase; three designs side by side:
//!
//! - `db-check-1-1`: readiness queries the dependency, one failure takes the
//!   pod out and one success puts it back;
//! - `db-check-3-2`: the same query, three failures out and two back (the
//!   chapter's readiness probe);
//! - `flag-only`: readiness answers from a flag the process keeps (ready
//!   once started, not ready while draining), and never asks the dependency.
//!
//! What is measured is what a balancer sees: the time with no pod in
//! rotation at all, when every request fails, including the ones that never
//! needed the dependency.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result};
use axum::{Router, extract::State, http::StatusCode, routing::get};
use lab_kit::{Output, Series, clock::monotonic_ms, net::AbortOnDrop, server::spawn_axum};
use serde::Serialize;
use tokio::time::Instant;

use crate::{
    Config,
    app::{ServiceState, app},
    dependency::{self, SlowWindow},
    kubelet::{KubeletProbe, ProbeKind, ProbeLog, run_prober},
    production,
    slow_dependency::out_of_rotation,
};

lab_kit::series! {
    /// How a pod decides it is ready, in the cascade part.
    pub enum ReadinessDesign in "cascade" {
        /// Queries the dependency; thresholds 1 and 1.
        DbCheckEager => "db-check-1-1",
        /// Queries the dependency; thresholds 3 and 2.
        DbCheckHysteresis => "db-check-3-2",
        /// Answers from the process's own flag.
        FlagOnly => "flag-only",
    }
}

impl ReadinessDesign {
    /// (failure threshold, success threshold).
    pub fn thresholds(self) -> (u32, u32) {
        match self {
            ReadinessDesign::DbCheckEager => (1, 1),
            ReadinessDesign::DbCheckHysteresis | ReadinessDesign::FlagOnly => (
                production::READINESS.failure_threshold,
                production::READINESS.success_threshold,
            ),
        }
    }
}

/// The incident, in production ms: blips of 6 s, each longer than one
/// readiness period (so every pod's probe meets one) and shorter than three
/// (so three failures in a row cannot), then a 25 s outage, longer than
/// three periods plus a timeout.
pub mod schedule {
    pub const DURATION_MS: u64 = 150_000;
    pub const BLIP_STARTS_MS: [u64; 3] = [10_000, 35_000, 60_000];
    pub const BLIP_MS: u64 = 6_000;
    pub const OUTAGE_FROM_MS: u64 = 90_000;
    pub const OUTAGE_MS: u64 = 25_000;

    const PERIOD: u64 = crate::production::READINESS.period_ms;
    const _: () = assert!(BLIP_MS > PERIOD && BLIP_MS < 2 * PERIOD);
    const _: () = assert!(
        OUTAGE_MS
            > crate::production::READINESS.failure_threshold as u64 * PERIOD
                + crate::production::READINESS.timeout_ms
    );
    const _: () = assert!(OUTAGE_FROM_MS + OUTAGE_MS < DURATION_MS);
}

/// What one design did over the run. Times in lab ms.
#[derive(Debug, Clone, Serialize)]
pub struct CascadeSummary {
    pub pods: u64,
    pub failure_threshold: u32,
    pub success_threshold: u32,
    /// Times a pod left rotation, all pods together.
    pub rotation_exits: u64,
    /// Time with no pod in rotation: every request fails.
    pub zero_endpoints_ms: f64,
    pub zero_endpoints_pct: f64,
    /// Time the dependency was failing, for scale.
    pub dependency_failing_ms: f64,
    pub duration_ms: f64,
}

// ANCHOR: flag
/// A pod whose readiness is its own state: ready once started, not ready
/// while it drains. The dependency's health is not its readiness.
fn flag_only_pod(ready: Arc<AtomicBool>) -> Router {
    Router::new()
        .route("/readyz", get(flag_readyz))
        .with_state(ready)
}

async fn flag_readyz(State(ready): State<Arc<AtomicBool>>) -> (StatusCode, &'static str) {
    if ready.load(Ordering::SeqCst) {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "draining\n")
    }
}
// ANCHOR_END: flag

/// Runs the three designs at once against one dependency and writes one
/// summary per design.
pub async fn run(config: &Config, out: &mut Output) -> Result<()> {
    let scale =
        |production_ms: u64| Duration::from_millis(production_ms / config.time_scale as u64);
    let lead = Duration::from_millis(100);
    let start = Instant::now() + lead;
    let t0_ms = monotonic_ms() + lead.as_secs_f64() * 1000.0;
    let slow = Duration::from_millis(config.slow_query_ms);
    let mut windows: Vec<SlowWindow> = schedule::BLIP_STARTS_MS
        .iter()
        .map(|&from| SlowWindow {
            from: start + scale(from),
            until: start + scale(from + schedule::BLIP_MS),
            slow,
        })
        .collect();
    windows.push(SlowWindow {
        from: start + scale(schedule::OUTAGE_FROM_MS),
        until: start + scale(schedule::OUTAGE_FROM_MS + schedule::OUTAGE_MS),
        slow,
    });
    let failing_ms: f64 = windows
        .iter()
        .map(|window| (window.until - window.from).as_secs_f64() * 1000.0)
        .sum();
    let dependency = dependency::start_with(windows).await?;
    let duration = scale(schedule::DURATION_MS);
    let until = start + duration;
    let period = Duration::from_millis(config.readiness_period_ms);
    let pods = config.cascade_pods.max(1);

    let mut servers = Vec::new();
    let mut probers: Vec<(ReadinessDesign, AbortOnDrop<Result<ProbeLog>>)> = Vec::new();
    for design in ReadinessDesign::ALL {
        let (failure_threshold, success_threshold) = design.thresholds();
        for pod in 0..pods {
            let router = match design {
                ReadinessDesign::FlagOnly => flag_only_pod(Arc::new(AtomicBool::new(true))),
                _ => {
                    let query_limit = 4 * slow;
                    app(Arc::new(ServiceState::new(
                        dependency.url("/query"),
                        query_limit,
                    )?))
                }
            };
            let server = spawn_axum(router).await?;
            let probe = KubeletProbe {
                kind: ProbeKind::Readiness,
                path: "/readyz",
                period,
                timeout: Duration::from_millis(config.readiness_timeout_ms),
                failure_threshold,
                success_threshold,
            };
            // Kubelets start probing pods at different moments: spread the
            // pods' phases evenly over one period.
            let phase = period * pod as u32 / pods as u32;
            let prober = run_prober(probe, server.url(""), start + phase, until);
            probers.push((design, AbortOnDrop::spawn(prober)));
            servers.push(server);
        }
    }
    let bound = lead + duration + Duration::from_secs(5);
    let mut logs: Vec<(ReadinessDesign, ProbeLog)> = Vec::new();
    for (design, prober) in probers {
        let log = prober
            .join_within(bound)
            .await
            .with_context(|| format!("a {} prober did not finish", design.series()))??;
        logs.push((design, log));
    }
    drop(servers);
    drop(dependency);

    let end_ms = duration.as_secs_f64() * 1000.0;
    for design in ReadinessDesign::ALL {
        let relative = |at: f64| at - t0_ms;
        let spans: Vec<Vec<(f64, f64)>> = logs
            .iter()
            .filter(|(of, _)| *of == design)
            .map(|(_, log)| out_of_rotation(log, relative, end_ms))
            .collect();
        let zero_endpoints_ms = all_out_ms(&spans);
        let (failure_threshold, success_threshold) = design.thresholds();
        out.write_summary(
            &design.series(),
            &CascadeSummary {
                pods: pods as u64,
                failure_threshold,
                success_threshold,
                rotation_exits: spans.iter().map(|pod| pod.len() as u64).sum(),
                zero_endpoints_ms,
                zero_endpoints_pct: zero_endpoints_ms * 100.0 / end_ms,
                dependency_failing_ms: failing_ms,
                duration_ms: end_ms,
            },
        )?;
    }
    Ok(())
}

/// The time every pod was out of rotation at once, given each pod's spans
/// out (start, end).
pub fn all_out_ms(pods: &[Vec<(f64, f64)>]) -> f64 {
    if pods.is_empty() {
        return 0.0;
    }
    let mut edges: Vec<f64> = pods
        .iter()
        .flatten()
        .flat_map(|&(from, to)| [from, to])
        .collect();
    edges.sort_by(f64::total_cmp);
    edges.dedup();
    edges
        .windows(2)
        .filter(|pair| {
            let middle = (pair[0] + pair[1]) / 2.0;
            pods.iter().all(|spans| {
                spans
                    .iter()
                    .any(|&(from, to)| from <= middle && middle < to)
            })
        })
        .map(|pair| pair[1] - pair[0])
        // A fold from +0.0: an empty float `sum()` is -0.0.
        .fold(0.0, |total, span| total + span)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_endpoints_is_the_time_all_pods_are_out_together() {
        let pods = vec![
            vec![(0.0, 10.0), (20.0, 30.0)],
            vec![(5.0, 25.0)],
            vec![(8.0, 22.0)],
        ];
        // All three out: 8 to 10 and 20 to 22.
        assert_eq!(all_out_ms(&pods), 4.0);
        assert_eq!(all_out_ms(&[vec![(0.0, 3.0)], vec![]]), 0.0);
        assert_eq!(all_out_ms(&[]), 0.0);
    }
}
