//! The check: serves `/login` (the piece) and `/health` on a runtime of its
//! own with two worker threads, as the lab's two-worker setups do; from the
//! check's runtime, which those workers cannot block, it times a `/health`
//! canary every 10 ms (the lab's external prober) through a burst of logins.

use std::{
    process::ExitCode,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use axum::{
    Router,
    routing::{get, post},
};
use exercise_kit::{Variant, Verdict, pick_async};
use lab_blocking_lag::server::Flavour;
use lab_kit::stats::Latencies;
use tokio::sync::watch;

exercise_kit::exercise!(
    "a worker thread that runs CPU work for 300 ms polls nothing else meanwhile: move the \
     stretching off the workers, onto tokio's blocking pool, and await its result",
);

/// The service's runtime, as in the lab's two-worker setups.
const WORKERS: usize = 2;
/// The burst: six logins at once, 300 ms of CPU each.
const LOGINS: usize = 6;
const COST: Duration = Duration::from_millis(300);
/// The canary's period, and the latency that means it waited for a worker.
const CANARY_EVERY: Duration = Duration::from_millis(10);
const STALL_MS: f64 = 150.0;

/// GET /health every `CANARY_EVERY` until stopped; each latency recorded.
async fn canary(url: String, mut stopped: watch::Receiver<bool>) -> Result<Latencies> {
    let client = reqwest::Client::builder().no_proxy().build()?;
    let seen = Arc::new(Mutex::new(Latencies::default()));
    let mut requests = tokio::task::JoinSet::new();
    let mut ticker = tokio::time::interval(CANARY_EVERY);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stopped.changed() => break,
        }
        let (client, url, seen) = (client.clone(), url.clone(), Arc::clone(&seen));
        requests.spawn(async move {
            let sent = Instant::now();
            if client
                .get(&url)
                .timeout(Duration::from_secs(5))
                .send()
                .await
                .is_ok()
            {
                seen.lock().expect("never poisoned").record(sent.elapsed());
            }
        });
    }
    while requests.join_next().await.is_some() {}
    let latencies = seen.lock().expect("never poisoned").clone();
    Ok(latencies)
}

async fn check(variant: Variant) -> Result<Verdict> {
    let app = Router::new()
        .route("/health", get(|| async { "ok\n" }))
        .route(
            "/login",
            post(move |password: String| {
                pick_async!(
                    variant,
                    blocking_lag_spawn_blocking::login(COST, password),
                    solution::login(COST, password),
                )
            }),
        );
    // The service's runtime: two workers, and the blocking pool tokio gives it.
    let service_runtime = Flavour::MultiThread { workers: WORKERS }.runtime()?;
    let server = service_runtime
        .spawn(lab_kit::server::spawn_axum(app))
        .await??;

    let (stop, stopped) = watch::channel(false);
    let canary = tokio::spawn(canary(server.url("/health"), stopped));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let client = reqwest::Client::builder().no_proxy().build()?;
    let burst_started = Instant::now();
    let mut logins = tokio::task::JoinSet::new();
    for user in 0..LOGINS {
        let request = client
            .post(server.url("/login"))
            .body(format!("hunter{user}"));
        logins.spawn(request.timeout(Duration::from_secs(10)).send());
    }
    let mut answered = 0;
    while let Some(joined) = logins.join_next().await {
        answered +=
            usize::from(matches!(joined, Ok(Ok(response)) if response.status().is_success()));
    }
    let burst_ms = burst_started.elapsed().as_secs_f64() * 1000.0;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = stop.send(true);
    let canary = tokio::time::timeout(Duration::from_secs(8), canary)
        .await
        .context("the canary did not stop")??
        .context("the canary failed")?;
    drop(server);
    service_runtime.shutdown_background();

    if answered < LOGINS {
        return Ok(Verdict::fail(format!(
            "only {answered} of {LOGINS} logins were answered with a success"
        )));
    }
    let summary = canary.summary();
    let (worst, p99) = (summary.max_ms, summary.p99_ms);
    let canaries = summary.count;
    if worst > STALL_MS {
        return Ok(Verdict::fail(format!(
            "a /health request waited up to {worst:.0} ms (p99 {p99:.0} ms of {canaries} canaries) \
             while {LOGINS} logins of {} ms of CPU each ran on a {WORKERS}-worker runtime \
             ({burst_ms:.0} ms for the burst): the stretching held the worker threads, so a \
             request that needs no work at all waited for one",
            COST.as_millis()
        )));
    }
    Ok(Verdict::pass(format!(
        "through a burst of {LOGINS} logins of {} ms of CPU each ({burst_ms:.0} ms in all), the \
         slowest of {canaries} /health requests took {worst:.0} ms (p99 {p99:.0} ms), under \
         {STALL_MS:.0} ms: the {WORKERS} worker threads stayed free",
        COST.as_millis()
    )))
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
