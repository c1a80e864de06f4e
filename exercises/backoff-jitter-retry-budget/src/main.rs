//! The check: 100 calls through the piece against a dependency that fails
//! one first attempt in ten (the retries must still cover those), then 100
//! calls against the backoff-jitter lab's flaky dependency on a route that
//! answers every request 503, counting the requests the server received.

use std::{
    collections::HashSet,
    process::ExitCode,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context, Result};
use axum::{
    Router,
    extract::{Path, State},
    http::StatusCode,
    routing::get,
};
use exercise_kit::{Variant, Verdict};
use lab_backoff_jitter::{
    flaky::{self, FlakyConfig, Recorder},
    live,
};
use lab_kit::server::spawn_axum;
use tokio::task::JoinSet;

exercise_kit::exercise!(
    "a per-call attempt limit bounds one call, not all of them: share one budget between every \
     call, that first attempts fill a little and retries spend (the lab's policy module has a \
     token bucket), so retries stay a small fraction of the calls when everything fails",
);

const CALLS: u64 = 100;
/// The calls run on this many workers, each one call at a time.
const WORKERS: u64 = 10;
/// The most attempts per call the check accepts in an outage.
const MOST_PER_CALL: f64 = 1.5;
/// The fewest calls, of 100, that must survive one failed first attempt in ten.
const FEWEST_RECOVERED: u64 = 95;
/// Every phase must be done by then, whatever the piece does.
const PATIENCE: Duration = Duration::from_secs(6);

/// Yours or the solution's `Retrying`, as one type.
enum Caller {
    Yours(backoff_jitter_retry_budget::Retrying),
    Solution(solution::Retrying),
}

impl Caller {
    fn new(variant: Variant, client: reqwest::Client) -> Caller {
        match variant {
            Variant::Yours => Caller::Yours(backoff_jitter_retry_budget::Retrying::new(client)),
            Variant::Solution => Caller::Solution(solution::Retrying::new(client)),
        }
    }

    async fn call(&self, url: &str) -> Option<reqwest::StatusCode> {
        match self {
            Caller::Yours(retrying) => retrying.get(url).await,
            Caller::Solution(retrying) => retrying.get(url).await,
        }
    }
}

/// `/blip/{call}`: the first attempt of every tenth call fails with 503.
async fn blip(State(seen): State<Arc<Mutex<HashSet<u64>>>>, Path(call): Path<u64>) -> StatusCode {
    let first = seen.lock().expect("not poisoned").insert(call);
    if first && call % 10 == 3 {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    }
}

/// Makes `CALLS` calls, `url(call)` each; how many ended with a 200.
/// Worker `w` makes calls `w`, `w + WORKERS`, ... one after the other.
async fn calls(caller: &Arc<Caller>, url: impl Fn(u64) -> String) -> Result<Option<u64>> {
    let mut workers = JoinSet::new();
    for worker in 0..WORKERS {
        let caller = Arc::clone(caller);
        let urls: Vec<String> = (worker..CALLS)
            .step_by(WORKERS as usize)
            .map(&url)
            .collect();
        workers.spawn(async move {
            let mut ok = 0;
            for url in urls {
                ok += u64::from(caller.call(&url).await == Some(reqwest::StatusCode::OK));
            }
            ok
        });
    }
    let mut ok = 0;
    let until = (tokio::time::Instant::now() + PATIENCE).into_std();
    while !workers.is_empty() {
        match tokio::time::timeout_at(until.into(), workers.join_next()).await {
            Ok(Some(joined)) => ok += joined.context("a worker panicked")?,
            Ok(None) => break,
            Err(_) => return Ok(None),
        }
    }
    Ok(Some(ok))
}

async fn check(variant: Variant) -> Result<Verdict> {
    let recorder = Recorder::new(FlakyConfig::default());
    let app = flaky::app(Arc::clone(&recorder)).merge(
        Router::new()
            .route("/blip/{call}", get(blip))
            .with_state(Arc::default()),
    );
    let server = spawn_axum(app).await?;
    let caller = Arc::new(Caller::new(variant, live::client()?));
    let Some(recovered) = calls(&caller, |call| server.url(&format!("/blip/{call}"))).await? else {
        return Ok(Verdict::fail(format!(
            "{CALLS} calls to a dependency that fails one first attempt in ten took over {} s",
            PATIENCE.as_secs()
        )));
    };
    let down = server.url("/status/503");
    let finished = calls(&caller, |_| down.clone()).await?;
    server.stop(Duration::from_millis(500)).await?;
    let requests = recorder
        .arrivals()
        .iter()
        .filter(|arrival| arrival.path == "/status/503")
        .count();
    let per_call = requests as f64 / CALLS as f64;
    if finished.is_none() {
        return Ok(Verdict::fail(format!(
            "{CALLS} calls to a dependency that is down were not done after {} s ({requests} \
             requests so far)",
            PATIENCE.as_secs()
        )));
    }
    let outage = format!(
        "a dependency that answered every request 503 received {requests} requests for {CALLS} \
         calls: {per_call:.2} attempts per call"
    );
    Ok(if per_call > MOST_PER_CALL {
        Verdict::fail(format!(
            "{outage}, above {MOST_PER_CALL}: in an outage the retries multiply the load on the \
             dependency by {per_call:.1} just as it tries to recover"
        ))
    } else if recovered < FEWEST_RECOVERED {
        Verdict::fail(format!(
            "{outage}, but only {recovered} of {CALLS} calls succeeded against a dependency that \
             fails one first attempt in ten: the retries must still cover transient failures"
        ))
    } else {
        Verdict::pass(format!(
            "{outage}, at most {MOST_PER_CALL}; and {recovered} of {CALLS} calls succeeded \
             against a dependency that fails one first attempt in ten"
        ))
    })
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
