//! Overload: what a slow dependency does to the calls that share its slots
//! (bulkheads), what a server should do with more work than it can finish
//! (load shedding), and how retries keep a dependency down after the cause of
//! its outage has gone (the storm).
//!
//! One module per experiment; every server is real, on 127.0.0.1 with a port
//! the kernel picks, on a clock compressed by `Config::time_scale`.

pub mod arrivals;
pub mod breakers;
pub mod bulkhead;
pub mod dependency;
pub mod enrichment;
pub mod guard;
pub mod health_probe;
pub mod placement;
pub mod retrying;
pub mod shedding;
pub mod storm;

use std::time::Duration;

use anyhow::{Context, Result};
use lab_kit::{Lab, Mode, Output, stats::LatencySummary};
use serde::{Deserialize, Serialize};

/// What one run measures. Every `_s` and `_ms` field is production time; the
/// lab runs it divided by `time_scale`, and so multiplies every rate by it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// How much faster than production the lab's clock runs in parts 1 to
    /// 4, and in the storm (whose request rates are the highest, so it runs
    /// closest to real time).
    pub time_scale: f64,
    pub storm_time_scale: f64,
    /// Part 1: users per second for each provider, for `bulkhead_duration_s`;
    /// the flaky provider hangs for `bulkhead_hang_s` between the two marks.
    pub bulkhead_rate_per_s: f64,
    pub bulkhead_duration_s: f64,
    pub bulkhead_service_ms: f64,
    pub bulkhead_hang_s: f64,
    pub bulkhead_slow_from_s: f64,
    pub bulkhead_slow_until_s: f64,
    /// The service's timeout for one call, and the user's whole budget
    /// (waiting for a slot included).
    pub bulkhead_call_timeout_s: f64,
    pub bulkhead_deadline_s: f64,
    /// The slots: per provider, and shared by both.
    pub bulkhead_per_provider: usize,
    pub bulkhead_shared: usize,
    /// Part 2: a server of `shedding_workers` workers at `shedding_service_ms`
    /// a request, offered these multiples of its capacity, each for
    /// `shedding_point_s`; clients give up after `shedding_client_timeout_s`.
    pub shedding_workers: usize,
    pub shedding_service_ms: f64,
    pub shedding_loads: Vec<f64>,
    pub shedding_point_s: f64,
    pub shedding_client_timeout_s: f64,
    /// Part 5: a dependency of `storm_workers` at `storm_service_ms` (and
    /// `storm_slow_service_ms` during the outage), first tries at
    /// `storm_rate_per_s`, each attempt timed out after `storm_attempt_timeout_ms`,
    /// up to `storm_retries` retries.
    pub storm_workers: usize,
    pub storm_service_ms: f64,
    pub storm_slow_service_ms: f64,
    pub storm_outage_from_s: f64,
    pub storm_outage_until_s: f64,
    pub storm_duration_s: f64,
    pub storm_rate_per_s: f64,
    pub storm_attempt_timeout_ms: f64,
    pub storm_retries: u32,
    /// Part 3: users per second for `breaker_duration_s`; the provider hangs
    /// (for `bulkhead_hang_s`) between the two marks; each attempt times out
    /// after `breaker_attempt_timeout_ms`, and a user retries up to
    /// `breaker_retries` times.
    pub breaker_rate_per_s: f64,
    pub breaker_duration_s: f64,
    pub breaker_fails_from_s: f64,
    pub breaker_fails_until_s: f64,
    pub breaker_attempt_timeout_ms: f64,
    pub breaker_retries: u32,
    /// Part 4: users per second for `placement_duration_s`, with part 3's
    /// attempt timeout and retries, after full-jitter pauses from
    /// `placement_backoff_base_ms`. The hung provider hangs between the two
    /// marks; the blipping one answers 503 for `placement_blip_ms` every
    /// `placement_blip_every_s` from `placement_first_blip_s`.
    pub placement_rate_per_s: f64,
    pub placement_duration_s: f64,
    pub placement_hang_from_s: f64,
    pub placement_hang_until_s: f64,
    pub placement_blip_ms: f64,
    pub placement_first_blip_s: f64,
    pub placement_blip_every_s: f64,
    pub placement_backoff_base_ms: f64,
    /// The server that sheds lets this many wait for a worker.
    pub storm_queue_limit: usize,
    pub storm_bucket_s: f64,
    /// Parts 6 and 7 run on a clock of their own, less compressed than parts
    /// 1 to 4: a batch puts two hundred connections per setup on loopback at
    /// once, and a timeout must not be spent in a busy machine's accept queue.
    pub guard_time_scale: f64,
    /// Part 6: `enrich_items` items for each provider, all at once. The
    /// limited provider answers in `enrich_service_ms` while its bucket
    /// (`enrich_rate_per_s`, at most `enrich_burst` saved up) has a token,
    /// and 429 otherwise; the hung one holds each request `enrich_hang_ms`
    /// and then answers 504. The guard's pieces: a timeout of
    /// `enrich_attempt_timeout_ms` on each attempt, `enrich_retries`
    /// retries, a bulkhead of `enrich_slots` with `enrich_slot_wait_ms` of
    /// waiting, and the lab's breaker.
    pub enrich_items: usize,
    pub enrich_service_ms: f64,
    pub enrich_rate_per_s: f64,
    pub enrich_burst: f64,
    pub enrich_hang_ms: f64,
    pub enrich_attempt_timeout_ms: f64,
    pub enrich_retries: u32,
    pub enrich_slots: usize,
    pub enrich_slot_wait_ms: f64,
    /// Part 7: users at the quiet or the busy rate, one call each, for
    /// `probe_duration_s`; the upstream dies at `probe_dies_at_s`. The probe
    /// asks its health route every `probe_interval_ms`, each probe timed out
    /// after `probe_timeout_ms`, and takes it out after `probe_failures`
    /// failures in a row.
    pub probe_quiet_rate_per_s: f64,
    pub probe_busy_rate_per_s: f64,
    pub probe_duration_s: f64,
    pub probe_dies_at_s: f64,
    pub probe_interval_ms: f64,
    pub probe_timeout_ms: f64,
    pub probe_failures: u32,
    pub seed: u64,
}

impl Lab for Config {
    const MANIFEST: &str = include_str!("../Cargo.toml");

    fn for_mode(mode: Mode) -> Config {
        Config {
            time_scale: mode.pick(4.0, 1.0),
            storm_time_scale: 1.0,
            bulkhead_rate_per_s: 20.0,
            bulkhead_duration_s: 11.0,
            bulkhead_service_ms: 50.0,
            bulkhead_hang_s: 5.0,
            bulkhead_slow_from_s: 2.0,
            bulkhead_slow_until_s: 10.0,
            bulkhead_call_timeout_s: 1.0,
            bulkhead_deadline_s: 2.0,
            bulkhead_per_provider: 5,
            bulkhead_shared: 10,
            shedding_workers: 2,
            shedding_service_ms: 100.0,
            shedding_loads: vec![0.5, 1.0, 1.5, 2.0, 3.0],
            shedding_point_s: mode.pick(4.0, 20.0),
            shedding_client_timeout_s: 1.0,
            breaker_rate_per_s: 40.0,
            breaker_duration_s: 8.0,
            breaker_fails_from_s: 2.0,
            breaker_fails_until_s: 6.0,
            breaker_attempt_timeout_ms: 300.0,
            breaker_retries: 2,
            placement_rate_per_s: 60.0,
            placement_duration_s: 9.0,
            placement_hang_from_s: 2.0,
            placement_hang_until_s: 5.0,
            placement_blip_ms: 200.0,
            placement_first_blip_s: 1.0,
            placement_blip_every_s: 1.5,
            placement_backoff_base_ms: 100.0,
            storm_workers: 10,
            storm_service_ms: 100.0,
            storm_slow_service_ms: 1000.0,
            storm_outage_from_s: 2.0,
            storm_outage_until_s: 4.0,
            storm_duration_s: mode.pick(12.0, 40.0),
            storm_rate_per_s: 60.0,
            storm_attempt_timeout_ms: 500.0,
            storm_retries: 3,
            storm_queue_limit: 10,
            storm_bucket_s: 0.5,
            guard_time_scale: mode.pick(2.0, 1.0),
            enrich_items: 100,
            enrich_service_ms: 50.0,
            enrich_rate_per_s: 50.0,
            enrich_burst: 20.0,
            enrich_hang_ms: 2500.0,
            enrich_attempt_timeout_ms: 600.0,
            enrich_retries: 2,
            enrich_slots: 10,
            enrich_slot_wait_ms: 3000.0,
            probe_quiet_rate_per_s: 2.0,
            probe_busy_rate_per_s: 50.0,
            probe_duration_s: 8.0,
            probe_dies_at_s: 1.2,
            probe_interval_ms: 500.0,
            probe_timeout_ms: 500.0,
            probe_failures: 2,
            seed: 2015,
        }
    }

    fn time_scale(&self) -> f64 {
        self.time_scale
    }

    async fn run(&self, out: &mut Output) -> Result<()> {
        run(self, out).await
    }
}

impl Config {
    /// Part 2's server: requests a second its workers finish, in production time.
    pub fn shedding_capacity_per_s(&self) -> f64 {
        self.shedding_workers as f64 / (self.shedding_service_ms / 1000.0)
    }
}

/// A production duration on a compressed clock.
pub fn on_lab_clock(production_s: f64, time_scale: f64) -> Duration {
    Duration::from_secs_f64(production_s / time_scale)
}

/// A latency summary measured on a compressed clock, in production ms.
pub fn in_production(summary: LatencySummary, time_scale: f64) -> LatencySummary {
    LatencySummary {
        count: summary.count,
        p50_ms: summary.p50_ms * time_scale,
        p99_ms: summary.p99_ms * time_scale,
        max_ms: summary.max_ms * time_scale,
        mean_ms: summary.mean_ms * time_scale,
    }
}

/// The whole lab, as records on `out`.
async fn run(config: &Config, out: &mut Output) -> Result<()> {
    // Parts 2 to 5 and 7 wait on timers at a few hundred requests a second,
    // so they run first, and beside the other labs when `cargo xtask book`
    // runs this one in its batch (`lab_kit::batch`). Parts 1 and 6 then run
    // alone: the bulkheads time calls to the millisecond, and the enrichment
    // batch opens twelve hundred connections at once, which would reach the
    // timeouts of whatever ran beside it. The records keep the chapter's order.
    eprintln!(
        "overload: load shedding ({} loads x {} servers), then the circuit breakers \
         (3 breakers x 2 layerings and none) and the breaker's place ({} cases) beside \
         the health probe ({} cases); beside them all, the retry storm ({} clients)",
        config.shedding_loads.len(),
        shedding::Shedding::ALL.len(),
        placement::PlacementCase::ALL.len(),
        health_probe::ProbeCase::ALL.len(),
        storm::Storm::ALL.len()
    );
    let (waiting, storm) = tokio::join!(waiting_parts(config), async {
        let mut storm = Output::collect();
        storm::run_storm(config, &mut storm)
            .await
            .context("the storm")
            .map(|()| storm)
    });
    let (shedding, breakers, placements, probes) = waiting?;
    let storm = storm?;
    lab_kit::batch::alone(lab_kit::slug!()).await?;
    eprintln!(
        "overload: bulkheads ({} setups, side by side), then the enrichment batch ({} setups, \
         side by side)",
        bulkhead::Bulkhead::ALL.len(),
        enrichment::Enrichment::ALL.len(),
    );
    let bulkheads = bulkhead::run_bulkheads(config).await.context("bulkheads")?;
    let batch = enrichment::run_enrichment(config)
        .await
        .context("the enrichment service")?;
    for (setup, outcome) in bulkheads {
        out.write_summary(&lab_kit::Series::series(&setup), &outcome)?;
    }
    out.append(&shedding)?;
    for (setup, outcome) in breakers {
        out.write_summary(&lab_kit::Series::series(&setup), &outcome)?;
    }
    for (case, outcome) in placements {
        out.write_summary(&lab_kit::Series::series(&case), &outcome)?;
    }
    for (setup, outcome) in batch {
        out.write_summary(&lab_kit::Series::series(&setup), &outcome)?;
    }
    for (case, outcome) in probes {
        out.write_summary(&lab_kit::Series::series(&case), &outcome)?;
    }
    out.append(&storm)?;
    Ok(())
}

/// What parts 2 to 5 and 7 measured.
type WaitingParts = (
    Output,
    Vec<(breakers::BreakerSetup, breakers::BreakerOutcome)>,
    Vec<(placement::PlacementCase, placement::PlacementOutcome)>,
    Vec<(health_probe::ProbeCase, health_probe::ProbeOutcome)>,
);

/// Load shedding, then the breakers and their place beside the health probe.
async fn waiting_parts(config: &Config) -> Result<WaitingParts> {
    let mut shedding = Output::collect();
    shedding::run_shedding(config, &mut shedding)
        .await
        .context("load shedding")?;
    // Parts 3 and 4 and part 7 run side by side, which keeps part 7 out of
    // the quick run's time.
    let (breaker_parts, probes) = tokio::join!(
        async {
            let breakers = breakers::run_breakers(config)
                .await
                .context("circuit breakers")?;
            let placements = placement::run_placements(config)
                .await
                .context("the breaker's place")?;
            anyhow::Ok((breakers, placements))
        },
        async {
            health_probe::run_probes(config)
                .await
                .context("the health probe")
        },
    );
    let (breakers, placements) = breaker_parts?;
    Ok((shedding, breakers, placements, probes?))
}

/// The lab binary's `main`; `src/main.rs` only calls it. It lives in the
/// library because the binary crate is where generic code is compiled at
/// opt-level 3 a second time: with `main` in the binary, each lab's binary
/// took 8 to 24 s to compile; with it here, under half a second
/// (ARCHITECTURE.md, "Timings and build profiles").
pub fn main() -> std::process::ExitCode {
    lab_kit::cli::run_lab::<Config>()
}
