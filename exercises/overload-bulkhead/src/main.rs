//! The check: two loopback providers (prices answers in 10 ms, reviews
//! hangs), and the service in front of them with the piece's slots, one
//! page per provider. It floods the reviews page, then sends prices users
//! one every 25 ms while the flood hangs, and times both pages.

use std::{
    process::ExitCode,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Result;
use axum::{Router, extract::State, http::StatusCode, routing::get};
use exercise_kit::{Variant, Verdict, pick_async};
use lab_kit::stats::Latencies;

use overload_bulkhead::Slots;

exercise_kit::exercise!(
    "give each provider its own bounded share of the slots (a bulkhead), so a hanging provider \
     can only hold its own, and refuse a call at once when its share is full",
);

const TOTAL_SLOTS: usize = 16;
const PRICES: usize = 0;
const REVIEWS: usize = 1;
/// The service's call timeout: 10 s in production, compressed 10x.
const CALL_TIMEOUT: Duration = Duration::from_secs(1);
const FLOOD: usize = 20;
const PRICE_USERS: usize = 10;

struct Service {
    variant: Variant,
    slots: Slots,
    client: reqwest::Client,
    providers: [String; 2],
}

/// One page: a slot, then the call to its provider.
async fn page(service: Arc<Service>, which: usize) -> StatusCode {
    let slot = pick_async!(
        service.variant,
        overload_bulkhead::slot(service.slots.clone(), which),
        solution::slot(service.slots.clone(), which),
    );
    let Some(_slot) = slot.await else {
        return StatusCode::SERVICE_UNAVAILABLE;
    };
    let call = service.client.get(&service.providers[which]);
    match call.timeout(CALL_TIMEOUT).send().await {
        Ok(response) if response.status().is_success() => StatusCode::OK,
        _ => StatusCode::GATEWAY_TIMEOUT,
    }
}

/// Sends `request`; its status (0: no answer) and how long it took.
async fn timed(request: reqwest::RequestBuilder) -> (u16, Duration) {
    let started = Instant::now();
    let sent = request.timeout(Duration::from_secs(5)).send().await;
    (
        sent.map_or(0, |answer| answer.status().as_u16()),
        started.elapsed(),
    )
}

async fn check(variant: Variant) -> Result<Verdict> {
    let slots: fn(usize) -> Slots = variant.pick(overload_bulkhead::slots, solution::slots);
    let providers = Router::new()
        .route(
            "/prices",
            get(|| tokio::time::sleep(Duration::from_millis(10))),
        )
        .route(
            "/reviews",
            get(|| tokio::time::sleep(Duration::from_secs(10))),
        );
    let providers = lab_kit::server::spawn_axum(providers).await?;
    let service = Arc::new(Service {
        variant,
        slots: slots(TOTAL_SLOTS),
        client: reqwest::Client::builder().no_proxy().build()?,
        providers: [providers.url("/prices"), providers.url("/reviews")],
    });
    let app = Router::new()
        .route(
            "/prices",
            get(|State(s): State<Arc<Service>>| page(s, PRICES)),
        )
        .route(
            "/reviews",
            get(|State(s): State<Arc<Service>>| page(s, REVIEWS)),
        )
        .with_state(service);
    let server = lab_kit::server::spawn_axum(app).await?;
    let users = reqwest::Client::builder().no_proxy().build()?;

    let mut flood = tokio::task::JoinSet::new();
    for _ in 0..FLOOD {
        flood.spawn(timed(users.get(server.url("/reviews"))));
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut prices = tokio::task::JoinSet::new();
    let mut arrivals = tokio::time::interval(Duration::from_millis(25));
    for _ in 0..PRICE_USERS {
        arrivals.tick().await;
        prices.spawn(timed(users.get(server.url("/prices"))));
    }
    let (prices, flood) = (prices.join_all().await, flood.join_all().await);
    drop((server, providers));

    let mut fast = Latencies::default();
    prices.iter().for_each(|(_, took)| fast.record(*took));
    let prices_ok = prices.iter().filter(|(status, _)| *status == 200).count();
    let fast = fast.summary();
    let timeout_ms = CALL_TIMEOUT.as_millis();
    if prices_ok < PRICE_USERS || fast.p99_ms > 200.0 {
        return Ok(Verdict::fail(format!(
            "with {FLOOD} reviews requests hanging, {prices_ok} of {PRICE_USERS} prices requests \
             succeeded, p50 {:.0} ms and p99 {:.0} ms for a provider that answers in 10 ms: they \
             waited for slots the hanging reviews calls held (each held until its {timeout_ms} ms \
             timeout, 10 s in production)",
            fast.p50_ms, fast.p99_ms
        )));
    }
    let refused: Vec<Duration> = flood
        .iter()
        .filter(|(status, _)| *status == 503)
        .map(|(_, took)| *took)
        .collect();
    let slowest_refusal = refused.iter().max().copied().unwrap_or_default();
    if refused.is_empty() || slowest_refusal > Duration::from_millis(200) {
        return Ok(Verdict::fail(format!(
            "prices stayed fast (p99 {:.0} ms), but {} of {FLOOD} reviews requests were refused, \
             the slowest refusal after {} ms: requests beyond the reviews share waited for a slot \
             instead of failing at once",
            fast.p99_ms,
            refused.len(),
            slowest_refusal.as_millis()
        )));
    }
    Ok(Verdict::pass(format!(
        "with {FLOOD} reviews requests hanging, {PRICE_USERS} of {PRICE_USERS} prices requests \
         succeeded with p50 {:.0} ms and p99 {:.0} ms, and {} reviews requests beyond their \
         share were refused within {} ms: the hanging provider held only its own slots",
        fast.p50_ms,
        fast.p99_ms,
        refused.len(),
        slowest_refusal.as_millis()
    )))
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
