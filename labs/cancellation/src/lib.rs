//! Cancellation: does a server's work stop when its client leaves, what a
//! route timeout leaves running after it has answered, and the spiral of
//! queries that run for nobody while a pool of SQLite connections drains.
//!
//! One module per experiment; everything runs on 127.0.0.1 with ports the
//! kernel picks, on a clock compressed by `Config::time_scale`.

pub mod cancel_safety;
pub mod case_log;
pub mod chain;
pub mod counting;
pub mod db;
pub mod downstream;
pub mod grpc_timeout;
pub mod half_written;
pub mod idempotency;
pub mod leave;
pub mod provider;
pub mod route_timeout;
pub mod spiral;

use std::{sync::Arc, time::Duration};

use anyhow::{Context, Result};
use lab_kit::{Lab, Mode, Output, Series};
use serde::{Deserialize, Serialize};

use crate::{db::SlowDatabase, leave::LeaveSetup, route_timeout::RouteTimeout};

/// What one run measures. Every `_s` field is production seconds; the lab
/// runs them divided by `time_scale`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// How much faster than production the lab's clock runs.
    pub time_scale: f64,
    /// Parts 1 and 2: how long the downstream call and the query each take.
    pub work_s: f64,
    /// Part 1: when the client gives up.
    pub leave_after_s: f64,
    /// Part 2 and the spiral: the route's timeout.
    pub route_timeout_s: f64,
    /// The spiral: the pool, the query timeout of the naive variant, how
    /// long users wait before they leave, and the load.
    pub pool_size: usize,
    pub query_timeout_s: f64,
    pub user_patience_s: f64,
    pub light_query_s: f64,
    pub heavy_query_s: f64,
    /// One request in this many runs the heavy query.
    pub heavy_every: u64,
    pub arrivals_per_s: f64,
    pub spiral_duration_s: f64,
    pub sample_every_s: f64,
    /// Part 6: a batch of requests, one in `count_slow_every` slower than
    /// its client waits, one in `count_fail_every` (of the rest) a real 500.
    pub count_requests: u64,
    pub count_slow_every: u64,
    pub count_fail_every: u64,
    pub count_fast_s: f64,
    pub count_slow_s: f64,
    pub count_client_timeout_s: f64,
    /// Part 5: callers sharing a bulkhead of `provider_bulkhead` permits,
    /// each call with a timeout, for `provider_duration_s`; one call in
    /// `provider_hang_every` hangs at the provider for `provider_hang_s`.
    pub provider_users: u64,
    pub provider_bulkhead: usize,
    pub provider_timeout_s: f64,
    pub provider_duration_s: f64,
    pub provider_hang_every: u64,
    pub provider_hang_s: f64,
    pub provider_fast_s: f64,
    /// Part 4: a burst of users through edge → middle → backend; the middle
    /// works `chain_middle_work_s` first, the backend's query takes
    /// `chain_query_s` alone on a pool of `chain_pool`; each hop keeps
    /// `chain_margin_s` of its budget for the answer's way back.
    pub chain_users: u64,
    pub chain_pool: usize,
    pub chain_middle_work_s: f64,
    pub chain_query_s: f64,
    pub chain_margin_s: f64,
    /// Part 7: frames the server writes, each in three pieces this many
    /// milliseconds apart, and the reader's ticker (not compressed: the
    /// result is which bytes arrive, not when).
    pub safety_frames: u64,
    pub safety_piece_gap_ms: u64,
    pub safety_tick_ms: u64,
    /// Part 7, writes: frames of `half_frame_bytes` to a slow reader, each
    /// write under a timeout of `half_write_timeout_ms`.
    pub half_frames: u64,
    pub half_frame_bytes: usize,
    pub half_write_timeout_ms: u64,
    /// Part 8: payments, each charged in `pay_charge_s` (one in
    /// `pay_slow_every` in `pay_slow_charge_s`), by a client that waits
    /// `pay_client_timeout_s` and tries `pay_attempts` times, `pay_backoff_s`
    /// apart; the server's Retry-After on a 409.
    pub payments: u64,
    pub pay_charge_s: f64,
    pub pay_slow_charge_s: f64,
    pub pay_slow_every: u64,
    pub pay_client_timeout_s: f64,
    pub pay_attempts: u64,
    pub pay_backoff_s: f64,
    pub pay_retry_after_s: u64,
}

impl Lab for Config {
    const MANIFEST: &str = include_str!("../Cargo.toml");

    fn for_mode(mode: Mode) -> Config {
        Config {
            time_scale: mode.pick(50.0, 10.0),
            work_s: 12.0,
            leave_after_s: 2.0,
            route_timeout_s: 10.0,
            pool_size: 4,
            query_timeout_s: 30.0,
            user_patience_s: 8.0,
            light_query_s: 1.0,
            heavy_query_s: 20.0,
            heavy_every: 5,
            arrivals_per_s: 0.8,
            spiral_duration_s: mode.pick(120.0, 300.0),
            sample_every_s: 2.0,
            count_requests: 40,
            count_slow_every: 4,
            count_fail_every: 10,
            count_fast_s: 0.2,
            count_slow_s: 5.0,
            count_client_timeout_s: 2.0,
            provider_users: 20,
            provider_bulkhead: 5,
            provider_timeout_s: 2.0,
            provider_duration_s: 30.0,
            provider_hang_every: 3,
            provider_hang_s: 60.0,
            provider_fast_s: 0.2,
            chain_users: 6,
            chain_pool: 2,
            chain_middle_work_s: 3.0,
            chain_query_s: 12.0,
            chain_margin_s: 0.5,
            safety_frames: mode.pick(50, 400),
            safety_piece_gap_ms: 2,
            safety_tick_ms: 1,
            half_frames: mode.pick(4, 16),
            half_frame_bytes: 64 * 1024,
            half_write_timeout_ms: 10,
            payments: mode.pick(30, 120),
            pay_charge_s: 0.5,
            pay_slow_charge_s: 6.0,
            pay_slow_every: 3,
            pay_client_timeout_s: 2.0,
            pay_attempts: 8,
            pay_backoff_s: 0.5,
            pay_retry_after_s: 1,
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
    /// A production duration on the lab's clock.
    pub fn lab(&self, production_seconds: f64) -> Duration {
        Duration::from_secs_f64(production_seconds / self.time_scale)
    }

    /// Lab milliseconds scaled back to production seconds.
    pub fn production_ms(&self, lab_ms: f64) -> f64 {
        lab_ms / 1000.0 * self.time_scale
    }
}

/// The whole lab, as records on `out`.
async fn run(config: &Config, out: &mut Output) -> Result<()> {
    let database = Arc::new(SlowDatabase::open(config.pool_size).context("opening the database")?);
    // One case at a time: the cases' queries burn the CPU, and side by side
    // on two cores they would measure each other.
    eprintln!("cancellation: does the work stop when the client leaves (5 variants x 2 protocols)");
    for setup in LeaveSetup::all() {
        let case = leave::leave_case(setup, Arc::clone(&database), config)
            .await
            .with_context(|| setup.series())?;
        out.write_summary(&setup.series(), &case)?;
    }
    eprintln!("cancellation: route timeouts (3 ways)");
    for kind in RouteTimeout::ALL {
        let case = route_timeout::route_case(kind, Arc::clone(&database), config)
            .await
            .with_context(|| kind.series())?;
        out.write_summary(&kind.series(), &case)?;
    }
    // One variant at a time: the backend's queries burn the CPU.
    eprintln!("cancellation: deadline propagation across three services (2 variants)");
    for variant in chain::ChainVariant::ALL {
        let outcome = chain::chain_case(variant, config)
            .await
            .with_context(|| variant.series())?;
        out.write_summary(&variant.series(), &outcome)?;
    }
    eprintln!("cancellation: counting client aborts (3 access logs)");
    let counts = counting::run_counting(config).await.context("counting")?;
    // Both come back in the order of their `ALL`.
    for (log, count) in counting::AccessLog::ALL.iter().zip(&counts) {
        out.write_summary(&log.series(), count)?;
    }
    eprintln!("cancellation: the provider's view (4 setups, side by side)");
    let views = provider::run_provider(config)
        .await
        .context("the provider's view")?;
    for (client, view) in provider::ProviderClient::ALL.iter().zip(&views) {
        out.write_summary(&client.series(), view)?;
    }
    eprintln!(
        "cancellation: cancel safety, a select! loop reading frames (3 readers, side by side)"
    );
    let readers = cancel_safety::run_cancel_safety(config)
        .await
        .context("cancel safety")?;
    for (reader, read) in cancel_safety::FrameReader::ALL.iter().zip(&readers) {
        out.write_summary(&reader.series(), read)?;
    }
    let writers = half_written::run_half_written(config)
        .await
        .context("cancel safety, writes")?;
    for (writer, wrote) in half_written::FrameWriter::ALL.iter().zip(&writers) {
        out.write_summary(&writer.series(), wrote)?;
    }
    eprintln!("cancellation: idempotency keys (3 servers)");
    let paid = idempotency::run_idempotency(config)
        .await
        .context("idempotency keys")?;
    for (handling, count) in idempotency::KeyHandling::ALL.iter().zip(&paid) {
        out.write_summary(&handling.series(), count)?;
    }
    eprintln!("cancellation: the spiral (3 variants)");
    spiral::run_spiral(config, out)
        .await
        .context("the spiral")?;
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
