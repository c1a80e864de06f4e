//! The check: serves the piece as `GET /quote` in front of a pricing service
//! that hangs (time compressed 20x), sends one request with the caller's
//! budget in the cancellation lab's `grpc-timeout` header, and measures when
//! the piece answered and what the pricing service saw: the budget it was
//! handed and how long its request stayed open.

use std::{
    process::ExitCode,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use axum::{Router, extract::State, http::HeaderMap, routing::get};
use exercise_kit::{Compression, Variant, Verdict, pick_async};
use lab_cancellation::grpc_timeout;
use lab_kit::server::spawn_axum;

exercise_kit::exercise!(
    "the caller's grpc-timeout is a budget from the moment the request arrived: what is left of \
     it, minus a margin, is the most the pricing call may take, and the pricing service needs \
     to be told it too (lab_cancellation::grpc_timeout parses and encodes the header)",
);

/// Time runs 20 times faster than in production.
const COMPRESSION: Compression = Compression(20.0);
/// The caller's budget: 8 s in production.
const BUDGET: Duration = Duration::from_millis(400);
/// The pricing call's own timeout: 30 s in production.
const OWN_TIMEOUT: Duration = Duration::from_millis(1500);
/// The pricing service hangs for 50 s (production) before it answers.
const HANG: Duration = Duration::from_millis(2500);
/// How late past the budget an answer may come on a busy machine.
const SLACK: Duration = Duration::from_millis(100);

/// What the pricing service saw of one request.
#[derive(Debug, Clone, Default)]
struct Seen {
    budget: Option<String>,
    open_for: Option<Duration>,
}

/// Notes how long the pricing service's handler lived, however it ended.
struct OpenFor {
    arrived: Instant,
    seen: Arc<Mutex<Seen>>,
}

impl Drop for OpenFor {
    fn drop(&mut self) {
        self.seen.lock().expect("not poisoned").open_for = Some(self.arrived.elapsed());
    }
}

async fn hanging_pricing(State(seen): State<Arc<Mutex<Seen>>>, headers: HeaderMap) -> &'static str {
    let budget = headers
        .get(grpc_timeout::HEADER)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
    seen.lock().expect("not poisoned").budget = budget;
    let _open = OpenFor {
        arrived: Instant::now(),
        seen,
    };
    tokio::time::sleep(HANG).await;
    "42\n"
}

async fn check(variant: Variant) -> Result<Verdict> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let pricing = spawn_axum(
        Router::new()
            .route("/price", get(hanging_pricing))
            .with_state(Arc::clone(&seen)),
    )
    .await?;
    let pricing_url = pricing.url("/price");
    let outbound = reqwest::Client::new();
    let app = Router::new().route(
        "/quote",
        get(move |headers: HeaderMap| {
            let pricing = outbound.get(&pricing_url);
            pick_async!(
                variant,
                cancellation_deadline_propagation::quote(pricing, headers, OWN_TIMEOUT),
                solution::quote(pricing, headers, OWN_TIMEOUT),
            )
        }),
    );
    let server = spawn_axum(app).await?;
    // The caller waits past its budget, to see when the handler answers.
    let started = Instant::now();
    let answer = reqwest::Client::new()
        .get(server.url("/quote"))
        .header(grpc_timeout::HEADER, grpc_timeout::encode(BUDGET))
        .header("x-request-id", "1")
        .timeout(OWN_TIMEOUT + HANG)
        .send()
        .await
        .context("the caller got no answer at all")?;
    let answered = started.elapsed();
    let status = answer.status().as_u16();
    // Let the pricing service's handler end (bounded).
    let until = Instant::now() + HANG;
    while seen.lock().expect("not poisoned").open_for.is_none() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.stop(Duration::from_millis(200)).await?;
    pricing.stop(Duration::from_millis(200)).await?;
    let seen = seen.lock().expect("not poisoned").clone();
    let budget_s = COMPRESSION.production_s(BUDGET);
    let answered_s = COMPRESSION.production_s(answered);
    let handed_on = seen.budget.as_deref().and_then(grpc_timeout::parse);
    let handed = seen
        .budget
        .as_ref()
        .map_or("no grpc-timeout".to_string(), |raw| {
            format!("grpc-timeout {raw:?}")
        });
    let open = seen.open_for.unwrap_or(HANG);
    let open_s = COMPRESSION.production_s(open);
    let compressed = format!(
        "time compressed {COMPRESSION}x: answered at {} ms, open {} ms",
        answered.as_millis(),
        open.as_millis()
    );
    if answered > BUDGET + SLACK {
        return Ok(Verdict::fail(format!(
            "the caller got {status} after {answered_s:.1} s, {:.1} s past the caller's \
             {budget_s:.0} s budget; the pricing call carried {handed} and stayed open \
             {open_s:.1} s ({compressed}): the handler waits on its own timeout long after \
             the caller gave up at {budget_s:.0} s, and the pricing service works for nobody",
            answered_s - budget_s
        )));
    }
    let within_budget = handed_on.is_some_and(|left| !left.is_zero() && left <= BUDGET);
    if !within_budget || open > BUDGET + SLACK {
        return Ok(Verdict::fail(format!(
            "the caller got {status} after {answered_s:.1} s, within its {budget_s:.0} s budget, \
             but the pricing call carried {handed} and stayed open {open_s:.1} s \
             ({compressed}): the next hop must be handed what is left of the budget"
        )));
    }
    Ok(Verdict::pass(format!(
        "the caller got {status} after {answered_s:.1} s, within its {budget_s:.0} s budget; \
         the pricing call carried {handed} and stayed open {open_s:.1} s instead of hanging \
         for {:.0} s ({compressed})",
        COMPRESSION.production_s(OWN_TIMEOUT)
    )))
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
