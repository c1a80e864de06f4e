//! Open-loop load: users arrive at a rate whatever the service's state, as
//! real traffic does. A closed loop (each user waits for the last answer
//! before sending the next) slows down when the service does, and so hides
//! every overload this lab is about.

use std::{future::Future, time::Duration};

use anyhow::{Result, anyhow};
use seeded_rng::SplitMix64;
use tokio::{task::JoinSet, time::Instant};

/// Starts `call(index, at)` for every arrival of a Poisson process of
/// `rate_per_s` from `start` for `duration`, each on its own task, and
/// returns what they returned (in no particular order) once all have ended;
/// a call that panicked is an error.
/// The number of arrivals is bounded by the seed's draw, which is about
/// `rate_per_s * duration`; every call must bound its own time.
pub async fn open_loop<T, F, Fut>(
    rate_per_s: f64,
    start: Instant,
    duration: Duration,
    seed: u64,
    mut call: F,
) -> Result<Vec<T>>
where
    T: Send + 'static,
    F: FnMut(u64, Duration) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
{
    let mut rng = SplitMix64::new(seed);
    let mut tasks = JoinSet::new();
    let mut at = Duration::ZERO;
    let mut index = 0;
    loop {
        // Exponential gaps: -ln(1 - U) / rate.
        at += Duration::from_secs_f64(-(1.0 - rng.unit()).ln() / rate_per_s);
        if at >= duration {
            break;
        }
        tokio::time::sleep_until(start + at).await;
        tasks.spawn(call(index, at));
        index += 1;
    }
    let mut results = Vec::with_capacity(tasks.len());
    while let Some(joined) = tasks.join_next().await {
        results.push(joined.map_err(|error| anyhow!("a call task failed: {error}"))?);
    }
    Ok(results)
}
