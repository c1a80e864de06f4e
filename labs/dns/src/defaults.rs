//! Part 6, the defaults of the Rust stack's DNS path, as this run measured
//! them: one row each, built from the other parts' results (and, for
//! hickory-resolver, from `ResolverOpts::default()` read at run time).

use anyhow::{Context, Result};
use serde::Serialize;

use crate::{
    blocking_pool::{PoolLoad, PoolLookups},
    families::{FamilyCase, FamilyOutcome, SystemLocalhost},
    old_address::{Bucket, PoolSetting, SwitchRun},
    per_request::LookupCount,
    resolvers::hickory_defaults,
};
use lab_kit::Series;

/// One row of the defaults table.
#[derive(Debug, Clone, Serialize)]
pub struct DefaultRow {
    pub setting: String,
    pub measured: String,
    pub part: String,
}

fn find<'a, T>(results: &'a [(String, T)], series: &str) -> Result<&'a T> {
    results
        .iter()
        .find(|(name, _)| name == series)
        .map(|(_, value)| value)
        .with_context(|| format!("no result for {series}"))
}

pub fn rows(
    system: &SystemLocalhost,
    lookups: &[(String, LookupCount)],
    pools: &[(String, PoolLookups)],
    families: &[(String, FamilyOutcome)],
    switches: &[(String, SwitchRun, Vec<Bucket>)],
) -> Result<Vec<(String, DefaultRow)>> {
    let per_request = find(lookups, "lookups/client-per-request/fast-resolver")?;
    let idle = find(pools, &PoolLoad::DefaultIdle.series())?;
    let flooded = find(pools, &PoolLoad::DefaultFlooded.series())?;
    let small_busy = find(pools, &PoolLoad::SmallBusy.series())?;
    let default_switch = switches
        .iter()
        .find(|(name, _, _)| *name == PoolSetting::Default.series())
        .map(|(_, run, _)| run)
        .context("no result for the default pool's switch")?;
    let (ndots, cache_size, timeout_s, attempts, strategy) = hickory_defaults();
    let [address_order, happy_eyeballs] = family_rows(families);
    Ok(vec![
        row(
            "resolver",
            "reqwest's resolver, DNS cache",
            format!(
                "getaddrinfo on the blocking pool, no cache: {} lookups for {} new connections",
                per_request.resolver_calls, per_request.requests
            ),
            "1, 2",
        ),
        row(
            "blocking-pool",
            "tokio's blocking pool (max_blocking_threads)",
            format!(
                "{} jobs ran at once out of {} spawned",
                flooded.peak_running_jobs, flooded.jobs
            ),
            "2",
        ),
        row(
            "lookup-queue",
            "a lookup behind a full blocking pool",
            format!(
                "{:.1} ms (4 threads, 4 jobs of {:.0} ms) vs {:.2} ms idle",
                small_busy.lookup_p50_ms, small_busy.job_ms, idle.lookup_p50_ms
            ),
            "2",
        ),
        address_order,
        happy_eyeballs,
        row(
            "hickory",
            "hickory-resolver ResolverOpts::default()",
            format!(
                "ndots {ndots}, cache {cache_size} entries, timeout {timeout_s} s, {attempts} attempts, {strategy}"
            ),
            "3",
        ),
        row(
            "pool-after-switch",
            "a pooled connection after a DNS change (defaults)",
            format!(
                "{} of {} requests still went to the old address; the last {:.0} ms after the switch",
                default_switch.old_after_switch,
                default_switch.requests_after_switch,
                default_switch.on_old_ms
            ),
            "5",
        ),
        row(
            "system-localhost",
            "this machine's getaddrinfo(\"localhost\")",
            system.addresses.join(", "),
            "4",
        ),
    ])
}

/// One row, its series `defaults/<name>`.
fn row(name: &str, setting: &str, measured: String, part: &str) -> (String, DefaultRow) {
    (
        format!("defaults/{name}"),
        DefaultRow {
            setting: setting.to_string(),
            measured,
            part: part.to_string(),
        },
    )
}

/// Part 4's rows: which address a connection tries first, and the Happy
/// Eyeballs fallback.
fn family_rows(families: &[(String, FamilyOutcome)]) -> [(String, DefaultRow); 2] {
    // Part 4 is skipped on a machine without [::1] on loopback.
    let fallback = find(families, &FamilyCase::SilentV6V6First.series()).ok();
    let refused_first = find(families, &FamilyCase::V4ServerV6First.series()).ok();
    let not_measured = || String::from("not measured: no [::1] on this machine's loopback");
    [
        row(
            "address-order",
            "which address first",
            refused_first.map_or_else(not_measured, |refused_first| {
                format!(
                    "the resolver's order; [::1] refused, then {} answered after {:.1} ms",
                    refused_first.answered_by, refused_first.ms
                )
            }),
            "4",
        ),
        row(
            "happy-eyeballs",
            "Happy Eyeballs fallback (reqwest, hyper-util HttpConnector)",
            fallback.map_or_else(not_measured, |fallback| {
                format!(
                    "the other family tried {:.0} ms after the first stalled",
                    fallback.min_ms
                )
            }),
            "4",
        ),
    ]
}
