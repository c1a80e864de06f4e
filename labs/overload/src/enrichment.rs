//! Part 6, the enrichment service end to end: a batch of items for each of
//! two providers, one that rate-limits (429 with `Retry-After` when its
//! token bucket is empty) and one that hangs, called through the outbound
//! guard of `guard.rs` with nothing switched on, with each of its pieces
//! alone, and whole. A piece is switched off by a setting under which it
//! never acts, so every setup runs the same code the chapter shows.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result, anyhow};
use axum::{
    Router,
    extract::State,
    http::{HeaderValue, StatusCode, header::RETRY_AFTER},
    response::{IntoResponse, Response},
    routing::get,
};
use lab_kit::{Series, concurrently::run_all, gauge::Gauge, server::spawn_axum};
use overload_sim::breaker::BreakerConfig;
use serde::Serialize;
use tokio::{task::JoinSet, time::Instant};

use crate::{
    Config,
    dependency::RETRY_AFTER_S,
    guard::{GuardConfig, OutboundGuard},
    on_lab_clock,
    retrying::lab_breaker,
};

lab_kit::series! {
    /// Which pieces of the outbound guard are on, for both providers.
    pub enum Enrichment in "enrich" {
        /// Nothing: no timeout, no retry, no bound, no breaker.
        Unguarded => "none",
        /// A timeout on each attempt, alone.
        TimeoutAlone => "timeout",
        /// Retries with backoff, `Retry-After` and a budget, alone.
        RetriesAlone => "retries",
        /// A bulkhead per provider, alone.
        BulkheadAlone => "bulkhead",
        /// A breaker per provider, alone.
        BreakerAlone => "breaker",
        /// The whole guard: bulkhead, breaker, retries with a budget, timeout.
        WholeGuard => "guard",
    }
}

impl Enrichment {
    fn timeout(self) -> bool {
        matches!(self, Enrichment::TimeoutAlone | Enrichment::WholeGuard)
    }
    fn retries(self) -> bool {
        matches!(self, Enrichment::RetriesAlone | Enrichment::WholeGuard)
    }
    fn bulkhead(self) -> bool {
        matches!(self, Enrichment::BulkheadAlone | Enrichment::WholeGuard)
    }
    fn breaker(self) -> bool {
        matches!(self, Enrichment::BreakerAlone | Enrichment::WholeGuard)
    }
}

/// What one setup did, in production time.
#[derive(Debug, Clone, Serialize)]
pub struct EnrichmentOutcome {
    /// The compression of this part's clock (the caption gives parts 1 to 4's).
    pub time_scale: f64,
    /// Items in all, and those enriched (a 200 from their provider) or not.
    pub items: u64,
    pub ok: u64,
    pub failed: u64,
    /// The rate-limited provider's items: enriched, and the 429s it sent.
    pub limited_ok: u64,
    pub limited_429s: u64,
    /// The hung provider's items: none is ever enriched; how many requests
    /// reached it, and the median time its items took to fail.
    pub hung_failed: u64,
    pub hung_requests: u64,
    pub hung_p50_ms: f64,
    /// The most requests each provider held at once.
    pub limited_peak: u64,
    pub hung_peak: u64,
    /// Items the guard refused without calling: its bulkhead was full, or
    /// its breaker open.
    pub refused_by_bulkhead: u64,
    pub refused_by_breaker: u64,
    /// From the batch's start to its last item's end.
    pub total_ms: f64,
}

/// The rate-limited provider: a token bucket on the lab's clock.
struct Limited {
    bucket: Mutex<(f64, Instant)>,
    rate_per_lab_s: f64,
    burst: f64,
    service: Duration,
    inside: Gauge,
    refused: AtomicU64,
}

async fn limited(State(provider): State<Arc<Limited>>) -> Response {
    let _inside = provider.inside.enter();
    let admitted = {
        // A std Mutex: a few arithmetic operations, never across an await.
        let mut bucket = provider.bucket.lock().expect("no panic holds it");
        let (tokens, refilled) = &mut *bucket;
        let now = Instant::now();
        let earned = now.duration_since(*refilled).as_secs_f64() * provider.rate_per_lab_s;
        *tokens = (*tokens + earned).min(provider.burst);
        *refilled = now;
        let admitted = *tokens >= 1.0;
        if admitted {
            *tokens -= 1.0;
        }
        admitted
    };
    if !admitted {
        provider.refused.fetch_add(1, Ordering::Relaxed);
        let retry_after = HeaderValue::from(RETRY_AFTER_S);
        return (StatusCode::TOO_MANY_REQUESTS, [(RETRY_AFTER, retry_after)]).into_response();
    }
    tokio::time::sleep(provider.service).await;
    StatusCode::OK.into_response()
}

/// The hung provider: holds every request for `hang`, then answers 504, as
/// a gateway in front of it would once its own timeout ran out.
struct Hung {
    hang: Duration,
    inside: Gauge,
    arrived: AtomicU64,
}

async fn hung(State(provider): State<Arc<Hung>>) -> StatusCode {
    let _inside = provider.inside.enter();
    provider.arrived.fetch_add(1, Ordering::Relaxed);
    tokio::time::sleep(provider.hang).await;
    StatusCode::GATEWAY_TIMEOUT
}

/// The guard's settings for one setup, on the lab's clock: each piece that
/// is off gets a value under which it never acts.
pub fn guard_config(setup: Enrichment, config: &Config, seed: u64) -> GuardConfig {
    let lab = |production_ms: f64| on_lab_clock(production_ms / 1000.0, config.guard_time_scale);
    let items = config.enrich_items;
    GuardConfig {
        // Off: a slot for every item of the batch.
        slots: if setup.bulkhead() {
            config.enrich_slots
        } else {
            items
        },
        slot_wait: lab(config.enrich_slot_wait_ms),
        // Off: longer than the hang, which ends with a 504.
        attempt_timeout: lab(if setup.timeout() {
            config.enrich_attempt_timeout_ms
        } else {
            config.enrich_hang_ms * 4.0
        }),
        retries: if setup.retries() {
            config.enrich_retries
        } else {
            0
        },
        backoff_base: lab(config.placement_backoff_base_ms),
        backoff_cap: lab(1000.0),
        retry_after_cap: lab(2000.0),
        // The storm's budget: a first try earns a tenth of a retry.
        budget_per_first_try: 0.1,
        budget_max: 10.0,
        // Off: a failure rate above 1 is never reached.
        breaker: if setup.breaker() {
            lab_breaker()
        } else {
            BreakerConfig {
                failure_rate: 2.0,
                ..lab_breaker()
            }
        },
        time_scale: config.guard_time_scale,
        seed,
    }
}

/// How one item ended.
struct Item {
    hung: bool,
    ok: bool,
    refused_by_bulkhead: bool,
    refused_by_breaker: bool,
    took: Duration,
}

async fn enrichment_case(setup: Enrichment, config: Config) -> Result<EnrichmentOutcome> {
    let scale = config.guard_time_scale;
    let lab = |production_ms: f64| on_lab_clock(production_ms / 1000.0, scale);
    let limited_provider = Arc::new(Limited {
        bucket: Mutex::new((config.enrich_burst, Instant::now())),
        rate_per_lab_s: config.enrich_rate_per_s * scale,
        burst: config.enrich_burst,
        service: lab(config.enrich_service_ms),
        inside: Gauge::new(),
        refused: AtomicU64::new(0),
    });
    let hung_provider = Arc::new(Hung {
        hang: lab(config.enrich_hang_ms),
        inside: Gauge::new(),
        arrived: AtomicU64::new(0),
    });
    let limited_server = spawn_axum(
        Router::new()
            .route("/enrich", get(limited))
            .with_state(Arc::clone(&limited_provider)),
    )
    .await
    .context("starting the rate-limited provider")?;
    let hung_server = spawn_axum(
        Router::new()
            .route("/enrich", get(hung))
            .with_state(Arc::clone(&hung_provider)),
    )
    .await
    .context("starting the hung provider")?;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("building the client")?;
    // One guard per provider: its own slots, breaker and budget.
    let guards = [
        (false, limited_server.url("/enrich"), config.seed),
        (true, hung_server.url("/enrich"), config.seed ^ 1),
    ]
    .map(|(hung, url, seed)| {
        let guard = OutboundGuard::new(client.clone(), guard_config(setup, &config, seed));
        (hung, url, Arc::new(guard))
    });
    // The batch: every item at once, as `join_all` over the items would.
    let started = Instant::now();
    let mut items = JoinSet::new();
    for (hung, url, guard) in &guards {
        for _ in 0..config.enrich_items {
            let (hung, url, guard) = (*hung, url.clone(), Arc::clone(guard));
            items.spawn(async move {
                let outcome = guard.get(&url).await;
                Item {
                    hung,
                    ok: matches!(&outcome, Ok(response) if response.status().is_success()),
                    refused_by_bulkhead: matches!(
                        outcome,
                        Err(crate::guard::GuardError::BulkheadFull)
                    ),
                    refused_by_breaker: matches!(
                        outcome,
                        Err(crate::guard::GuardError::BreakerOpen)
                    ),
                    took: started.elapsed(),
                }
            });
        }
    }
    let mut ended = Vec::new();
    while let Some(item) = items.join_next().await {
        ended.push(item.map_err(|error| anyhow!("an item's task failed: {error}"))?);
    }
    let total = started.elapsed();
    let count =
        |keep: &dyn Fn(&Item) -> bool| ended.iter().filter(|item| keep(item)).count() as u64;
    let ok = count(&|item| item.ok);
    let mut hung_ms: Vec<f64> = ended
        .iter()
        .filter(|item| item.hung)
        .map(|item| item.took.as_secs_f64() * 1000.0 * scale)
        .collect();
    hung_ms.sort_by(f64::total_cmp);
    Ok(EnrichmentOutcome {
        time_scale: scale,
        items: ended.len() as u64,
        ok,
        failed: ended.len() as u64 - ok,
        limited_ok: count(&|item| !item.hung && item.ok),
        limited_429s: limited_provider.refused.load(Ordering::Relaxed),
        hung_failed: count(&|item| item.hung && !item.ok),
        hung_requests: hung_provider.arrived.load(Ordering::Relaxed),
        hung_p50_ms: hung_ms.get(hung_ms.len() / 2).copied().unwrap_or(0.0),
        limited_peak: limited_provider.inside.peak(),
        hung_peak: hung_provider.inside.peak(),
        refused_by_bulkhead: count(&|item| item.refused_by_bulkhead),
        refused_by_breaker: count(&|item| item.refused_by_breaker),
        total_ms: total.as_secs_f64() * 1000.0 * scale,
    })
}

/// Every setup side by side, each with its own two providers and guards.
pub async fn run_enrichment(config: &Config) -> Result<Vec<(Enrichment, EnrichmentOutcome)>> {
    let config = config.clone();
    run_all(Enrichment::ALL, Series::series, move |setup| {
        enrichment_case(setup, config.clone())
    })
    .await
}
