//! Part 1, bulkheads: an enrichment service calls a fast provider and a
//! flaky one that hangs for a while. With one pool of slots for both, the
//! hung calls hold every slot and the fast provider's users wait behind
//! them; with slots per provider, the fast provider does not notice.

use std::{sync::Arc, time::Duration};

use anyhow::{Context, Result, anyhow, bail};
use lab_kit::{
    Series,
    concurrently::run_all,
    gauge::Gauge,
    stats::{Latencies, LatencySummary},
};
use serde::Serialize;
use tokio::{sync::Semaphore, time::Instant};
use tower::{
    Service, ServiceBuilder, ServiceExt, limit::ConcurrencyLimit, util::BoxCloneSyncService,
};

use crate::{
    Config,
    arrivals::open_loop,
    dependency::{Dependency, DependencyConfig},
    in_production, on_lab_clock,
};

lab_kit::series! {
    /// How the service bounds its calls to the two providers.
    pub enum Bulkhead in "bulkhead" {
        /// No bound, and the flaky provider stays healthy: the baseline.
        Healthy => "healthy",
        /// No bound: every user's call goes out at once.
        NoLimit => "no-limit",
        /// No bound, but a `reqwest::Client` (so a connection pool) per
        /// provider.
        ClientPerProvider => "client-per-provider",
        /// One `Semaphore` of slots for both providers.
        Shared => "shared",
        /// A `Semaphore` per provider.
        PerProvider => "per-provider",
        /// `tower::limit::ConcurrencyLimit` around each provider's client.
        PerProviderTower => "per-provider-tower",
    }
}

/// What one setup did to each provider's users, in production time.
#[derive(Debug, Clone, Serialize)]
pub struct BulkheadOutcome {
    /// The fast provider's users: how long they waited (a failed call
    /// counts with the time it took to fail), and how many failed.
    pub fast_calls: usize,
    pub fast_p50_ms: f64,
    pub fast_p99_ms: f64,
    pub fast_failed: u64,
    pub flaky_calls: usize,
    pub flaky_p50_ms: f64,
    pub flaky_p99_ms: f64,
    pub flaky_failed: u64,
    /// The most requests each provider held at once.
    pub fast_peak_at_provider: u64,
    pub flaky_peak_at_provider: u64,
    /// Connections the flaky provider accepted over the run.
    pub flaky_connections: u64,
    /// The most calls inside the service at once (waiting or out).
    pub peak_calls_in_service: u64,
    /// The most calls waiting for a slot at once.
    pub peak_waiting_for_a_slot: u64,
}

/// `reqwest` behind a tower layer: a URL in, the status out.
type Call = BoxCloneSyncService<String, reqwest::StatusCode, anyhow::Error>;

// ANCHOR: slots
/// The service's slots, one way or another.
#[derive(Clone)]
enum Slots {
    Unbounded,
    /// A semaphore for each provider, `[fast, flaky]`: one each, or one
    /// shared pool given to both.
    Semaphores([Arc<Semaphore>; 2]),
    /// One `ConcurrencyLimit` each; a clone shares its semaphore.
    Tower([ConcurrencyLimit<Call>; 2]),
}

/// One call to provider `which` (0 fast, 1 flaky), waiting for a slot first.
async fn call(
    slots: Slots,
    which: usize,
    client: reqwest::Client,
    url: String,
    timeout: Duration,
    waiting: Gauge,
) -> Result<()> {
    let request = client.get(&url).timeout(timeout);
    let status = match slots {
        Slots::Unbounded => request.send().await?.status(),
        Slots::Semaphores(slots) => {
            let _slot = {
                let _waiting = waiting.enter();
                Arc::clone(&slots[which]).acquire_owned().await?
            };
            request.send().await?.status()
        }
        Slots::Tower(mut limits) => {
            let limit = &mut limits[which];
            {
                // `ready` takes the slot; the call's future holds it.
                let _waiting = waiting.enter();
                limit.ready().await?;
            }
            limit.call(url).await?
        }
    };
    if !status.is_success() {
        bail!("the provider answered {status}");
    }
    Ok(())
}
// ANCHOR_END: slots

fn tower_call(client: reqwest::Client, timeout: Duration, limit: usize) -> ConcurrencyLimit<Call> {
    let send = tower::service_fn(move |url: String| {
        let request = client.get(url).timeout(timeout);
        async move { Ok::<_, anyhow::Error>(request.send().await?.status()) }
    });
    ServiceBuilder::new()
        .concurrency_limit(limit)
        .service(BoxCloneSyncService::new(send))
}

/// Every setup, side by side, each with its own two providers.
pub async fn run_bulkheads(config: &Config) -> Result<Vec<(Bulkhead, BulkheadOutcome)>> {
    let config = config.clone();
    let results = run_all(Bulkhead::ALL, Series::series, move |setup| {
        let config = config.clone();
        async move { bulkhead_case(setup, &config).await }
    })
    .await?;
    Ok(results)
}

/// One setup: both providers' users arrive for the whole run.
pub async fn bulkhead_case(setup: Bulkhead, config: &Config) -> Result<BulkheadOutcome> {
    let scale = config.time_scale;
    let lab = |production_s: f64| on_lab_clock(production_s, scale);
    let epoch = Instant::now();
    let fast = Dependency::start(provider_config(config, false), epoch)
        .await
        .context("the fast provider")?;
    let flaky = Dependency::start(provider_config(config, setup != Bulkhead::Healthy), epoch)
        .await
        .context("the flaky provider")?;
    let client = reqwest::Client::builder()
        .build()
        .context("building the service's client")?;
    let timeout = lab(config.bulkhead_call_timeout_s);
    let slots = slots_for(setup, config, &client, timeout);
    let calls = Gauge::new();
    let waiting = Gauge::new();
    let deadline = lab(config.bulkhead_deadline_s);
    let duration = lab(config.bulkhead_duration_s);
    let rate = config.bulkhead_rate_per_s * scale;
    let users = |which: usize, url: String, client: reqwest::Client| {
        let (slots, calls, waiting) = (slots.clone(), calls.clone(), waiting.clone());
        open_loop(
            rate,
            epoch,
            duration,
            config.seed + which as u64,
            move |_, _| {
                let call = call(
                    slots.clone(),
                    which,
                    client.clone(),
                    url.clone(),
                    timeout,
                    waiting.clone(),
                );
                let in_service = calls.enter();
                async move {
                    let started = Instant::now();
                    let outcome = tokio::time::timeout(deadline, call).await;
                    drop(in_service);
                    (started.elapsed(), matches!(outcome, Ok(Ok(()))))
                }
            },
        )
    };
    let (fast_calls, flaky_calls) = if setup == Bulkhead::ClientPerProvider {
        let flaky_client = reqwest::Client::builder()
            .build()
            .context("building the flaky provider's client")?;
        tokio::join!(
            users(0, fast.url(), client.clone()),
            users(1, flaky.url(), flaky_client)
        )
    } else {
        tokio::join!(
            users(0, fast.url(), client.clone()),
            users(1, flaky.url(), client.clone())
        )
    };
    let (fast_summary, fast_failed) = summarize(fast_calls?, scale);
    let (flaky_summary, flaky_failed) = summarize(flaky_calls?, scale);
    if fast_summary.count == 0 {
        return Err(anyhow!("no user arrived for the fast provider"));
    }
    Ok(BulkheadOutcome {
        fast_calls: fast_summary.count,
        fast_p50_ms: fast_summary.p50_ms,
        fast_p99_ms: fast_summary.p99_ms,
        fast_failed,
        flaky_calls: flaky_summary.count,
        flaky_p50_ms: flaky_summary.p50_ms,
        flaky_p99_ms: flaky_summary.p99_ms,
        flaky_failed,
        fast_peak_at_provider: fast.stats().held.peak(),
        flaky_peak_at_provider: flaky.stats().held.peak(),
        flaky_connections: flaky.connections(),
        peak_calls_in_service: calls.peak(),
        peak_waiting_for_a_slot: waiting.peak(),
    })
}

/// A provider that answers in `bulkhead_service_ms`; the flaky one (`slow`)
/// hangs for `bulkhead_hang_s` between `bulkhead_slow_from_s` and
/// `bulkhead_slow_until_s`.
fn provider_config(config: &Config, slow: bool) -> DependencyConfig {
    let lab = |production_s: f64| on_lab_clock(production_s, config.time_scale);
    DependencyConfig {
        // Enough workers that a provider never queues: the lab is about the
        // service's slots, not the provider's.
        workers: 256,
        service: lab(config.bulkhead_service_ms / 1000.0),
        slow_service: lab(config.bulkhead_hang_s),
        slow_from: lab(config.bulkhead_slow_from_s),
        slow_until: if slow {
            lab(config.bulkhead_slow_until_s)
        } else {
            Duration::ZERO
        },
        work_outlives_caller: false,
        queue_limit: None,
    }
}

/// The setup's slots: none, one pool for both providers, or a pool per
/// provider (semaphores or tower's `ConcurrencyLimit`).
fn slots_for(
    setup: Bulkhead,
    config: &Config,
    client: &reqwest::Client,
    timeout: Duration,
) -> Slots {
    match setup {
        Bulkhead::Healthy | Bulkhead::NoLimit | Bulkhead::ClientPerProvider => Slots::Unbounded,
        Bulkhead::Shared => {
            let pool = Arc::new(Semaphore::new(config.bulkhead_shared));
            Slots::Semaphores([Arc::clone(&pool), pool])
        }
        Bulkhead::PerProvider => Slots::Semaphores(
            [0, 1].map(|_| Arc::new(Semaphore::new(config.bulkhead_per_provider))),
        ),
        Bulkhead::PerProviderTower => Slots::Tower(
            [0, 1].map(|_| tower_call(client.clone(), timeout, config.bulkhead_per_provider)),
        ),
    }
}

/// One provider's users: their latency in production time, and how many
/// failed.
fn summarize(outcomes: Vec<(Duration, bool)>, scale: f64) -> (LatencySummary, u64) {
    let mut latencies = Latencies::default();
    let mut failed = 0;
    for (elapsed, ok) in outcomes {
        latencies.record(elapsed);
        failed += u64::from(!ok);
    }
    (in_production(latencies.summary(), scale), failed)
}
