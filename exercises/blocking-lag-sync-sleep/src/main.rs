//! The check: serves `/stock` (the piece) on a runtime of its own with two
//! worker threads, with a lag probe beside it on the same runtime (as the
//! lab's server runs one): a task that asks to wake every 5 ms and records
//! how late it woke. A burst of lookups comes from the check's own runtime.

use std::{
    process::ExitCode,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Result;
use axum::{Router, extract::Path, routing::get};
use exercise_kit::{Variant, Verdict, pick_async};
use lab_blocking_lag::server::Flavour;
use lab_kit::stats::percentile;
use tokio::time::MissedTickBehavior;

exercise_kit::exercise!(
    "a thread that sleeps in a blocking call polls no other task: use the SDK's async client \
     and `.await` it (or, with no async client, run the blocking call on tokio's blocking pool)",
);

/// Eight lookups of 250 ms at once, on two workers.
const LOOKUPS: usize = 8;
const ROUND_TRIP: Duration = Duration::from_millis(250);
const WORKERS: usize = 2;
/// The lag probe asks to wake this often; a wake-up later than `LAG_MS`
/// means it waited for a worker.
const TICK: Duration = Duration::from_millis(5);
const LAG_MS: f64 = 100.0;

/// How late each 5 ms wake-up came, in ms, into `lags`, until aborted.
async fn lag_probe(lags: Arc<Mutex<Vec<f64>>>) {
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let due = ticker.tick().await;
        let late = due.elapsed().as_secs_f64() * 1000.0;
        lags.lock().expect("never poisoned").push(late);
    }
}

async fn check(variant: Variant) -> Result<Verdict> {
    let app = Router::new().route(
        "/stock/{sku}",
        get(move |Path(sku): Path<String>| {
            pick_async!(
                variant,
                blocking_lag_sync_sleep::stock(sku, ROUND_TRIP),
                solution::stock(sku, ROUND_TRIP),
            )
        }),
    );
    let runtime = Flavour::MultiThread { workers: WORKERS }.runtime()?;
    let server = runtime.spawn(lab_kit::server::spawn_axum(app)).await??;
    let lags = Arc::new(Mutex::new(Vec::new()));
    let probe = runtime.spawn(lag_probe(Arc::clone(&lags)));
    tokio::time::sleep(Duration::from_millis(150)).await;

    let client = reqwest::Client::builder().no_proxy().build()?;
    let started = Instant::now();
    let lookups = (0..LOOKUPS).map(|n| {
        let request = client.get(server.url(&format!("/stock/sku-{n}")));
        request.timeout(Duration::from_secs(8)).send()
    });
    let mut burst = tokio::task::JoinSet::new();
    for lookup in lookups {
        burst.spawn(lookup);
    }
    let answered = burst.join_all().await.iter().filter(|r| r.is_ok()).count();
    let burst_ms = started.elapsed().as_secs_f64() * 1000.0;
    tokio::time::sleep(Duration::from_millis(50)).await;
    probe.abort();
    drop(server);
    runtime.shutdown_background();

    let mut lags = std::mem::take(&mut *lags.lock().expect("never poisoned"));
    lags.sort_by(f64::total_cmp);
    let worst = lags.last().copied().unwrap_or(f64::NAN);
    let p99 = percentile(&lags, 99.0);
    let per_call = ROUND_TRIP.as_millis();
    if answered < LOOKUPS {
        return Ok(Verdict::fail(format!(
            "only {answered} of {LOOKUPS} lookups were answered within 8 s"
        )));
    }
    if worst.is_nan() || worst > LAG_MS {
        return Ok(Verdict::fail(format!(
            "a timer on the service's runtime fired up to {worst:.0} ms late (p99 {p99:.0} ms) \
             during {LOOKUPS} lookups of {per_call} ms each, and the burst took {burst_ms:.0} ms: \
             each blocking call held one of the {WORKERS} worker threads for its whole round \
             trip, so the lookups ran {WORKERS} at a time and every other task waited"
        )));
    }
    Ok(Verdict::pass(format!(
        "{LOOKUPS} lookups of {per_call} ms each took {burst_ms:.0} ms together, and a 5 ms \
         timer on the same {WORKERS}-worker runtime fired at most {worst:.0} ms late (p99 \
         {p99:.0} ms): the workers kept polling while the lookups waited"
    )))
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
