//! Retries, backoff and jitter: the contention simulation swept over client
//! counts, then a live flaky axum dependency hit by reqwest clients through
//! several retry policies, the retry libraries people reach for, and retry
//! amplification through a chain of services.
//!
//! The simulation ([`backoff_sim`]) is the same code the chapter's widget runs
//! in the browser. Everything live runs on 127.0.0.1 with ports the kernel picks.

pub mod cap;
pub mod chain;
pub mod deadline;
pub mod errors;
pub mod flaky;
pub mod libraries;
pub mod live;
pub mod policy;

use std::time::Duration;

use anyhow::{Context, Result};
use backoff_sim::{SimConfig, Strategy, average, simulate};
use lab_kit::{Lab, Mode, Output};
use serde::{Deserialize, Serialize};

/// What one run measures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// Client counts of the simulation sweep.
    pub sweep_clients: Vec<u32>,
    /// Seeded runs averaged per sweep point.
    pub sweep_runs: u32,
    /// The load-over-time run: clients, and the width of a time bucket.
    pub load_clients: u32,
    pub load_bucket_ms: f64,
    /// The load chart shows the first this many milliseconds (exponential
    /// backoff without jitter runs on for a minute; its summary says so).
    pub load_horizon_ms: f64,
    /// Concurrent callers of the live flaky dependency, and its outage.
    pub live_clients: usize,
    pub live_outage_ms: u64,
    pub live_bucket_ms: u64,
    /// The live retry policy.
    pub base_ms: u64,
    pub cap_ms: u64,
    pub max_attempts: u32,
    pub per_attempt_timeout_ms: u64,
    pub total_deadline_ms: u64,
    pub budget_ratio: f64,
    pub budget_initial_tokens: u32,
    /// Callers per retry library measured.
    pub library_clients: usize,
    /// The deepest chain of services in the amplification experiment, and the
    /// attempts each layer makes.
    pub chain_depth: u32,
    pub chain_attempts: u32,
    /// The deadline part: callers per pair, the caller's budget, how long
    /// the dependency is out (longer than the budget; its Retry-After says
    /// the rest of it), and each attempt's timeout.
    pub deadline_callers: usize,
    pub deadline_budget_ms: u64,
    pub deadline_outage_ms: u64,
    pub deadline_per_attempt_ms: u64,
    /// The long outage: how long the dependency is down, and the attempts
    /// each caller may make (enough to meet the outage at the cap).
    pub cap_outage_ms: u64,
    pub cap_attempts: u32,
    /// Calls per failure kind in the part on which errors are retried.
    pub errors_calls_per_kind: usize,
    pub seed: u64,
}

impl Lab for Config {
    const MANIFEST: &str = include_str!("../Cargo.toml");

    fn for_mode(mode: Mode) -> Config {
        Config {
            sweep_clients: mode.pick(
                vec![10, 25, 50, 75, 100, 150, 200],
                (1..=20).map(|step| step * 10).collect(),
            ),
            sweep_runs: mode.pick(10, 50),
            load_clients: 100,
            load_bucket_ms: 20.0,
            load_horizon_ms: 2000.0,
            live_clients: mode.pick(100, 300),
            live_outage_ms: 1000,
            live_bucket_ms: 50,
            base_ms: 50,
            cap_ms: 800,
            max_attempts: 6,
            per_attempt_timeout_ms: 500,
            total_deadline_ms: 4000,
            budget_ratio: 0.1,
            budget_initial_tokens: 5,
            library_clients: 20,
            chain_depth: mode.pick(4, 5),
            chain_attempts: 3,
            deadline_callers: mode.pick(50, 200),
            deadline_budget_ms: 1000,
            deadline_outage_ms: 3000,
            deadline_per_attempt_ms: 300,
            cap_outage_ms: 5000,
            cap_attempts: 12,
            errors_calls_per_kind: 5,
            seed: 2015,
        }
    }

    async fn run(&self, out: &mut Output) -> Result<()> {
        run(self, out).await
    }
}

/// One point of the simulation sweep (the mean of `runs` seeded runs).
#[derive(Debug, Clone, Serialize)]
pub struct ContentionPoint {
    pub clients: u32,
    pub calls: f64,
    pub failures: f64,
    pub completion_ms: f64,
    pub runs: u32,
}

/// One bucket of calls over time.
#[derive(Debug, Clone, Serialize)]
pub struct LoadBucket {
    pub t_ms: f64,
    pub calls: u32,
}

/// The simulation at one client count, per strategy, for the table.
#[derive(Debug, Clone, Serialize)]
pub struct SimSummary {
    pub clients: u32,
    pub calls: f64,
    pub failures: f64,
    pub completion_ms: f64,
    /// Calls relative to no backoff at all.
    pub calls_vs_none: f64,
    pub runs: u32,
}

/// The simulation half of the lab: the sweep, the table at `load_clients`,
/// and one run's calls over time per strategy.
pub fn simulation(config: &Config, out: &mut Output) -> Result<()> {
    for strategy in Strategy::ALL {
        eprintln!(
            "backoff-jitter: simulating {} over {} client counts",
            strategy.name(),
            config.sweep_clients.len()
        );
        for &clients in &config.sweep_clients {
            let mean = average(
                &SimConfig::published(clients, strategy, config.seed),
                config.sweep_runs,
            );
            out.write_sample(
                &format!("sim-{}", strategy.name()),
                &ContentionPoint {
                    clients,
                    calls: mean.calls,
                    failures: mean.failures,
                    completion_ms: mean.completion_ms,
                    runs: mean.runs,
                },
            )?;
        }
    }
    let at = |strategy| {
        average(
            &SimConfig::published(config.load_clients, strategy, config.seed),
            config.sweep_runs,
        )
    };
    let none = at(Strategy::None);
    for strategy in Strategy::ALL {
        let mean = at(strategy);
        out.write_summary(
            &format!("sim-{}", strategy.name()),
            &SimSummary {
                clients: config.load_clients,
                calls: mean.calls,
                failures: mean.failures,
                completion_ms: mean.completion_ms,
                calls_vs_none: mean.calls / none.calls,
                runs: mean.runs,
            },
        )?;
        // One seeded run, bucketed: the shape of the load, not an average.
        let run = simulate(&SimConfig::published(
            config.load_clients,
            strategy,
            config.seed,
        ));
        let buckets = (config.load_horizon_ms / config.load_bucket_ms).ceil() as usize;
        for (index, calls) in run
            .calls_per_bucket(config.load_bucket_ms)
            .into_iter()
            .chain(std::iter::repeat(0))
            .take(buckets)
            .enumerate()
        {
            out.write_sample(
                &format!("load-{}", strategy.name()),
                &LoadBucket {
                    t_ms: index as f64 * config.load_bucket_ms,
                    calls,
                },
            )?;
        }
    }
    Ok(())
}

/// The whole lab, as records on `out`.
async fn run(config: &Config, out: &mut Output) -> Result<()> {
    simulation(config, out).context("the simulation sweep")?;
    live::storm(config, out)
        .await
        .context("the live flaky dependency")?;
    // The deadline part and the long outage wait on timers for three and
    // five seconds: they run beside the libraries and the chain, into
    // buffers of their own.
    let (mut deadline_out, mut cap_out) = (Output::collect(), Output::collect());
    let mut errors_out = Output::collect();
    let (rest, deadline, cap, errors) = tokio::join!(
        async {
            libraries::compare(config, out)
                .await
                .context("the retry libraries")?;
            chain::amplification(config, out)
                .await
                .context("retry amplification")
        },
        deadline::run(config, &mut deadline_out),
        cap::run(config, &mut cap_out),
        errors::run(config, &mut errors_out)
    );
    rest?;
    deadline.context("a deadline over the retries")?;
    cap.context("the long outage")?;
    errors.context("which errors are retried")?;
    for part in [&deadline_out, &cap_out, &errors_out] {
        out.append(part)?;
    }
    Ok(())
}

/// Milliseconds of a duration, for records.
pub fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// The lab binary's `main`; `src/main.rs` only calls it. It lives in the
/// library because the binary crate is where generic code is compiled at
/// opt-level 3 a second time: with `main` in the binary, each lab's binary
/// took 8 to 24 s to compile; with it here, under half a second
/// (ARCHITECTURE.md, "Timings and build profiles").
pub fn main() -> std::process::ExitCode {
    lab_kit::cli::run_lab::<Config>()
}
