//! Health checks: what a liveness probe and a readiness probe each decide,
//! and why liveness must not check a shared dependency.
//!
//! Two experiments, one module each:
//! - [`slow_dependency`], measured: a real axum service on 127.0.0.1 whose
//!   dependency (another loopback server, its "database") turns slow for a
//!   while, probed the way a kubelet probes (period, timeout, failure and
//!   success thresholds) by three probers at once: liveness on an endpoint
//!   that answers from the process, liveness on one that queries the
//!   dependency, and readiness on the latter, which decides routing. Time is
//!   compressed by `time_scale`.
//! - [`cascade`], measured: three pods sharing a dependency that blips,
//!   with readiness that queries it (thresholds 1/1 and 3/2) or answers from
//!   a flag; the time with no pod in rotation at all.
//! - [`fleet`], simulated: what those restarts do to a fleet of pods sharing
//!   the database, which one machine cannot run in seconds.

pub mod app;
pub mod cascade;
pub mod dependency;
pub mod fleet;
pub mod kubelet;
pub mod slow_dependency;

use anyhow::{Context, Result};
use lab_kit::{Lab, Mode, Output};
use serde::{Deserialize, Serialize};

/// The production values the lab's timings are scaled down from, in ms.
pub mod production {
    use std::time::Duration;

    use crate::kubelet::{KubeletProbe, ProbeKind};

    /// One probe's timing as a pod spec declares it, in production ms.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ProbeSpec {
        pub period_ms: u64,
        pub timeout_ms: u64,
        pub failure_threshold: u32,
        pub success_threshold: u32,
    }

    impl ProbeSpec {
        /// The probe on `path`, its times divided by `compression`.
        pub fn probe(self, kind: ProbeKind, path: &'static str, compression: u64) -> KubeletProbe {
            KubeletProbe {
                kind,
                path,
                period: Duration::from_millis(self.period_ms / compression),
                timeout: Duration::from_millis(self.timeout_ms / compression),
                failure_threshold: self.failure_threshold,
                success_threshold: self.success_threshold,
            }
        }
    }

    /// Liveness: Kubernetes' defaults (`periodSeconds: 10`,
    /// `timeoutSeconds: 1`, `failureThreshold: 3`, `successThreshold: 1`,
    /// which liveness requires).
    pub const LIVENESS: ProbeSpec = ProbeSpec {
        period_ms: 10_000,
        timeout_ms: 1_000,
        failure_threshold: 3,
        success_threshold: 1,
    };
    /// Readiness: every 5 s, with hysteresis: three failures take the pod
    /// out, two successes put it back.
    pub const READINESS: ProbeSpec = ProbeSpec {
        period_ms: 5_000,
        success_threshold: 2,
        ..LIVENESS
    };
    /// A query while the dependency is slow (5 ms when it is not).
    pub const SLOW_QUERY_MS: u64 = 3_000;
    /// The incident: the dependency is slow from here to there, 90 s. Both
    /// ends fall between probes (half a readiness period after one), so no
    /// probe races the switch.
    pub const SLOW_FROM_MS: u64 = 32_500;
    pub const SLOW_UNTIL_MS: u64 = 122_500;
    /// The whole experiment, from the first probe.
    pub const DURATION_MS: u64 = 160_000;

    // The mechanism the lab shows needs these; checked when the crate compiles.
    const _: () = assert!(
        SLOW_QUERY_MS > LIVENESS.timeout_ms && SLOW_QUERY_MS > READINESS.timeout_ms,
        "a slow query must outlast the probes' timeouts"
    );
    const _: () = assert!(
        LIVENESS.timeout_ms < LIVENESS.period_ms && READINESS.timeout_ms < READINESS.period_ms,
        "a probe ends before the next one starts"
    );
    const _: () = assert!(SLOW_FROM_MS < SLOW_UNTIL_MS && SLOW_UNTIL_MS < DURATION_MS);
}

lab_kit::series! {
    /// What a liveness probe checks: the comparison of both experiments.
    pub enum LivenessCheck {
        /// The probe's endpoint queries the database (the dependency).
        Database => "liveness-checks-db",
        /// The probe's endpoint answers from the process.
        Process => "liveness-checks-process",
    }
}

/// What one run measures. Times in milliseconds, already scaled.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// Production time divided by lab time (25: 160 s ran as 6.4 s).
    pub time_scale: f64,
    pub liveness_period_ms: u64,
    pub liveness_timeout_ms: u64,
    pub liveness_failure_threshold: u32,
    pub readiness_period_ms: u64,
    pub readiness_timeout_ms: u64,
    pub readiness_failure_threshold: u32,
    pub readiness_success_threshold: u32,
    pub slow_query_ms: u64,
    pub dependency_slow_from_ms: u64,
    pub dependency_slow_until_ms: u64,
    pub duration_ms: u64,
    /// Pods in each design of the cascade part (its schedule is
    /// `cascade::schedule`, in production ms, scaled by `time_scale`).
    pub cascade_pods: usize,
    /// The fleet simulation's rules (simulated seconds, not scaled).
    #[serde(flatten)]
    pub fleet: fleet::FleetConfig,
}

impl Lab for Config {
    const MANIFEST: &str = include_str!("../Cargo.toml");

    fn for_mode(mode: Mode) -> Config {
        let time_scale: u64 = mode.pick(25, 5);
        let scaled = |millis: u64| millis / time_scale;
        use production::*;
        Config {
            time_scale: time_scale as f64,
            liveness_period_ms: scaled(LIVENESS.period_ms),
            liveness_timeout_ms: scaled(LIVENESS.timeout_ms),
            liveness_failure_threshold: LIVENESS.failure_threshold,
            readiness_period_ms: scaled(READINESS.period_ms),
            readiness_timeout_ms: scaled(READINESS.timeout_ms),
            readiness_failure_threshold: READINESS.failure_threshold,
            readiness_success_threshold: READINESS.success_threshold,
            slow_query_ms: scaled(SLOW_QUERY_MS),
            dependency_slow_from_ms: scaled(SLOW_FROM_MS),
            dependency_slow_until_ms: scaled(SLOW_UNTIL_MS),
            duration_ms: scaled(DURATION_MS),
            cascade_pods: 3,
            fleet: fleet::FleetConfig::default(),
        }
    }

    fn time_scale(&self) -> f64 {
        self.time_scale
    }

    async fn run(&self, out: &mut Output) -> Result<()> {
        run(self, out).await
    }
}

/// The whole lab: the probes against a slow dependency, then the fleet.
async fn run(config: &Config, out: &mut Output) -> Result<()> {
    eprintln!(
        "health-checks: probing a service whose dependency is slow for {} ms of {} ms",
        config.dependency_slow_until_ms - config.dependency_slow_from_ms,
        config.duration_ms
    );
    // The cascade's probers wait on timers, as the first part's do: they
    // run side by side, the cascade into its own buffer, copied after.
    let mut cascade_records = Output::collect();
    let (first, cascade) = tokio::join!(
        slow_dependency::run(config, out),
        cascade::run(config, &mut cascade_records)
    );
    first.context("the probes against a slow dependency")?;
    cascade.context("the readiness cascade")?;
    for record in cascade_records.records() {
        if let lab_kit::Record::Summary(point) = record {
            out.write_summary(&point.series, &point.values)?;
        }
    }
    eprintln!(
        "health-checks: simulating a fleet of {} pods",
        config.fleet.pods
    );
    fleet::write_fleet(&config.fleet, out).context("the fleet simulation")?;
    Ok(())
}

/// The lab binary's `main`; `src/main.rs` only calls it. It lives in the
/// library because the binary crate is where generic code is compiled at
/// opt-level 3 a second time: with `main` in the binary, each lab's binary
/// took 8 to 24 s to compile; with it here, under half a second
/// (ARCHITECTURE.md, "Timings and build profiles").
pub fn main() -> std::process::ExitCode {
    lab_kit::cli::run_lab::<Config>()
}
