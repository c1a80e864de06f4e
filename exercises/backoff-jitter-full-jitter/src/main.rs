//! The check: the backoff-jitter lab's flaky dependency (down for its first
//! 1.2 s, recording every request), 50 callers with warm connections that
//! fail together and retry through the piece's delay, and the server's own
//! record of when the retries landed.

use std::{
    process::ExitCode,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use exercise_kit::{Variant, Verdict};
use lab_backoff_jitter::{
    flaky::{self, FlakyConfig, Recorder},
    live,
};
use lab_kit::server::spawn_axum;
use seeded_rng::SplitMix64;
use tokio::{sync::Barrier, task::JoinSet};

exercise_kit::exercise!(
    "callers that fail at the same moment and compute the same delay come back at the same \
     moment; keep the capped exponential as the window, and draw each sleep at random from the \
     whole of it with the caller's generator",
);

const CALLERS: usize = 50;
const MAX_ATTEMPTS: u32 = 6;
const BASE: Duration = Duration::from_millis(100);
const CAP: Duration = Duration::from_millis(1600);
/// The dependency is down this long after it starts.
const OUTAGE: Duration = Duration::from_millis(1200);
const PER_ATTEMPT: Duration = Duration::from_millis(500);
/// The window the herd is counted in.
const WINDOW: Duration = Duration::from_millis(20);
/// Every caller must be done by then, whatever the delays.
const PATIENCE: Duration = Duration::from_secs(8);

type Delay = fn(u32, Duration, Duration, &mut SplitMix64) -> Duration;

/// One caller: a warm connection, then, with all the others, one call
/// retried through `delay`. True if it got a 200.
async fn caller(id: u64, url: String, warm: String, start: Arc<Barrier>, delay: Delay) -> bool {
    let Ok(client) = live::client() else {
        return false;
    };
    let _ = client.get(&warm).timeout(PER_ATTEMPT).send().await;
    start.wait().await;
    let mut rng = SplitMix64::new(id.wrapping_mul(1_000_003).wrapping_add(7));
    for retry in 0..MAX_ATTEMPTS {
        if retry > 0 {
            tokio::time::sleep(delay(retry, BASE, CAP, &mut rng)).await;
        }
        let request = client.get(&url).header("x-client", id).timeout(PER_ATTEMPT);
        if let Ok(response) = request.send().await
            && response.status().is_success()
        {
            return true;
        }
    }
    false
}

/// The most entries of `times` (sorted) within any span of `window`.
fn busiest_window(times: &[Duration], window: Duration) -> usize {
    let mut first = 0;
    let mut most = 0;
    for (last, &time) in times.iter().enumerate() {
        while time - times[first] >= window {
            first += 1;
        }
        most = most.max(last + 1 - first);
    }
    most
}

async fn check(variant: Variant) -> Result<Verdict> {
    let delay: Delay = variant.pick(
        backoff_jitter_full_jitter::retry_delay,
        solution::retry_delay,
    );
    let recorder = Recorder::new(FlakyConfig {
        outage: OUTAGE,
        ..FlakyConfig::default()
    });
    let server = spawn_axum(flaky::app(Arc::clone(&recorder))).await?;
    let start = Arc::new(Barrier::new(CALLERS));
    let mut callers = JoinSet::new();
    for id in 0..CALLERS as u64 {
        callers.spawn(caller(
            id,
            server.url("/item"),
            server.url("/status/200"),
            Arc::clone(&start),
            delay,
        ));
    }
    let began = Instant::now();
    let mut succeeded = 0;
    let until = (began + PATIENCE).into();
    while let Ok(Some(joined)) = tokio::time::timeout_at(until, callers.join_next()).await {
        succeeded += usize::from(joined.context("a caller panicked")?);
    }
    let unfinished = callers.len();
    callers.abort_all();
    server.stop(Duration::from_millis(500)).await?;
    if unfinished > 0 {
        return Ok(Verdict::fail(format!(
            "{unfinished} of {CALLERS} callers were still retrying after {} s: a delay must stay \
             within the cap ({} ms)",
            PATIENCE.as_secs(),
            CAP.as_millis()
        )));
    }
    // Each caller's first attempt is the outage itself; the rest are retries.
    let mut seen = std::collections::HashSet::new();
    let mut retries: Vec<Duration> = recorder
        .arrivals()
        .into_iter()
        .filter(|arrival| arrival.path == "/item" && !seen.insert(arrival.client))
        .map(|arrival| arrival.at)
        .collect();
    retries.sort();
    anyhow::ensure!(
        !retries.is_empty(),
        "no caller retried, against a dependency that was down"
    );
    let peak = busiest_window(&retries, WINDOW);
    let share = peak as f64 * 100.0 / CALLERS as f64;
    let counts = format!(
        "{share:.0}% of {CALLERS} callers; {} retries in all, {succeeded} of {CALLERS} calls \
         succeeded",
        retries.len()
    );
    let window_ms = WINDOW.as_millis();
    Ok(if peak * 2 >= CALLERS {
        Verdict::fail(format!(
            "{peak} of the callers' retries arrived within one {window_ms} ms window ({counts}): \
             callers that failed together retry together, so each retry is a spike on a \
             dependency that is trying to recover"
        ))
    } else {
        Verdict::pass(format!(
            "at most {peak} retries arrived within any {window_ms} ms window ({counts}): the \
             callers that failed together came back spread out"
        ))
    })
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
