//! DNS for an HTTP client: how many lookups a client makes, where reqwest's
//! default lookups wait (tokio's blocking pool), a real DNS server on
//! loopback with a TTL and search domains, the order in which address
//! families are tried, and the pooled connection that keeps talking to an
//! address DNS no longer gives.
//!
//! One module per experiment. Everything runs on 127.0.0.0/8 and [::1] and
//! needs neither root nor a change to the machine's resolver configuration:
//! the lab's clients get their answers from resolvers the lab hands to
//! reqwest's `dns_resolver` hook, and the DNS server is the lab's own.

pub mod blocking_pool;
pub mod defaults;
pub mod dns_server;
pub mod families;
pub mod max_age;
pub mod old_address;
pub mod per_request;
pub mod resolvers;
pub mod server_lookups;
pub mod servers;

use anyhow::{Context, Result};
use lab_kit::{Lab, Mode, Output};
use serde::{Deserialize, Serialize};

/// What one run measures. Times are real (the lab compresses nothing but
/// the TTLs and ages of part 5, which say so).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// Part 1: requests per setup, one at a time.
    pub lookup_requests: usize,
    /// Part 1: the slow resolver's delay before each answer.
    pub slow_resolver_ms: f64,
    /// Part 2: how long each blocking job holds its thread.
    pub job_ms: f64,
    /// Part 2: rounds of (start the jobs, look up, wait for the jobs).
    pub pool_rounds: usize,
    /// Part 2: jobs that flood the default pool (more than its 512 threads).
    pub flood_jobs: usize,
    /// Part 3: the DNS server's delay before each answer.
    pub dns_delay_ms: f64,
    /// Part 3: the TTL of the server's answers, and the run of requests.
    pub cache_ttl_s: u32,
    pub cache_interval_ms: f64,
    pub cache_requests: usize,
    /// Part 4: requests against the silent family.
    pub eyeballs_repeats: usize,
    /// Part 5: the record's TTL, traffic before and after the switch, one
    /// request every `interval_ms`, the settings compared, chart buckets.
    /// Shorter than production (TTLs of 30 to 300 s, ages of minutes) so a
    /// run takes seconds; what is compared is the order of the events.
    pub switch_ttl_s: u32,
    pub warm_s: f64,
    pub watch_s: f64,
    pub interval_ms: f64,
    pub idle_timeout_ms: f64,
    pub max_age_ms: f64,
    pub bucket_ms: f64,
}

impl Lab for Config {
    const MANIFEST: &str = include_str!("../Cargo.toml");

    fn for_mode(mode: Mode) -> Config {
        Config {
            lookup_requests: mode.pick(60, 300),
            slow_resolver_ms: 20.0,
            job_ms: 100.0,
            pool_rounds: mode.pick(5, 20),
            flood_jobs: 600,
            dns_delay_ms: 10.0,
            cache_ttl_s: mode.pick(1, 2),
            cache_interval_ms: 50.0,
            cache_requests: mode.pick(40, 120),
            eyeballs_repeats: mode.pick(3, 10),
            switch_ttl_s: mode.pick(1, 2),
            warm_s: mode.pick(1.0, 2.0),
            watch_s: mode.pick(4.0, 12.0),
            interval_ms: 20.0,
            idle_timeout_ms: mode.pick(300.0, 1000.0),
            max_age_ms: mode.pick(1500.0, 4000.0),
            bucket_ms: mode.pick(250.0, 500.0),
        }
    }

    async fn run(&self, out: &mut Output) -> Result<()> {
        run(self, out).await
    }
}

/// One part of the lab: says it starts, runs it, and writes a summary per
/// row it returns.
async fn part<T: Serialize>(
    out: &mut Output,
    name: &str,
    work: impl Future<Output = Result<Vec<(String, T)>>>,
) -> Result<Vec<(String, T)>> {
    eprintln!("dns: {name}");
    let rows = work.await.context(name.to_string())?;
    out.write_summaries(&rows)?;
    Ok(rows)
}

const PART_LOOKUPS: &str = "part 1, lookups per request";
const PART_POOL: &str = "part 2, lookups behind a busy blocking pool";
const PART_CACHE: &str = "part 3, the lab's DNS server: its cache";
const PART_SEARCH: &str = "part 3, the lab's DNS server: search domains";
const PART_FAMILIES: &str = "part 4, address families and Happy Eyeballs";

/// The whole lab, as records on `out`.
async fn run(config: &Config, out: &mut Output) -> Result<()> {
    let system = families::system_localhost().await?;
    out.write_summary("system/localhost", &system)?;
    // Parts 3 to 5 wait on the lab's DNS server and on timers, so they run
    // first, and beside the other labs when `cargo xtask book` runs this one
    // in its batch (`lab_kit::batch`). Parts 1 and 2 then run alone: they
    // time lookups of a millisecond or less, and part 2 keeps both cores
    // busy on purpose. The records keep the chapter's order.
    let mut waiting = Output::collect();
    part(&mut waiting, PART_CACHE, server_lookups::run_cache(config)).await?;
    part(&mut waiting, PART_SEARCH, server_lookups::run_search()).await?;
    let families = part(&mut waiting, PART_FAMILIES, families::run_families(config)).await?;
    if families.is_empty() {
        waiting.write_summary("family/skipped", &families::Skipped::no_ipv6_loopback())?;
    }
    eprintln!("dns: part 5, the pool that outlives a DNS change");
    let switches = old_address::run_switch(config)
        .await
        .context("part 5, the DNS switch")?;
    for (series, run, buckets) in &switches {
        for bucket in buckets {
            waiting.write_sample(series, bucket)?;
        }
        waiting.write_summary(series, run)?;
    }
    lab_kit::batch::alone(lab_kit::slug!()).await?;
    let lookups = part(out, PART_LOOKUPS, per_request::run_lookups(config)).await?;
    let pools = part(out, PART_POOL, blocking_pool::run_pools(config)).await?;
    out.append(&waiting)?;
    out.write_summaries(&defaults::rows(
        &system, &lookups, &pools, &families, &switches,
    )?)?;
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
