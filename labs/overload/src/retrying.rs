//! Retrying and breaking, shared by the storm, the breakers and the outbound
//! guard: a retry budget, the full-jitter pause before a retry, and the
//! lab's circuit breaker on a clock.

use std::{future::Future, sync::Mutex, time::Duration};

use anyhow::{Context, Result};

use backoff_sim::{Strategy, backoff_ms};
use overload_sim::breaker::{Breaker, BreakerConfig, BreakerState};
use seeded_rng::SplitMix64;
use tokio::time::Instant;

/// The breaker every part of the lab uses, in production milliseconds: open
/// at half of the last 20 calls failing (at least 10), for 1 s, then probe
/// with 5 calls.
pub fn lab_breaker() -> BreakerConfig {
    BreakerConfig {
        window: 20,
        min_calls: 10,
        failure_rate: 0.5,
        open_ms: 1_000,
        half_open_probes: 5,
    }
}

/// `overload_sim`'s breaker (a state machine over a caller's clock) on this
/// process's clock, scaled back to production milliseconds by `time_scale`.
pub struct ClockedBreaker {
    breaker: Mutex<Breaker>,
    epoch: Instant,
    time_scale: f64,
}

impl ClockedBreaker {
    /// Times run from `epoch`.
    pub fn new(config: BreakerConfig, epoch: Instant, time_scale: f64) -> ClockedBreaker {
        ClockedBreaker {
            breaker: Mutex::new(Breaker::new(config)),
            epoch,
            time_scale,
        }
    }

    fn now_ms(&self) -> u64 {
        (self.epoch.elapsed().as_secs_f64() * 1000.0 * self.time_scale) as u64
    }

    fn breaker(&self) -> std::sync::MutexGuard<'_, Breaker> {
        // A std Mutex: held for a few comparisons, never across an .await.
        self.breaker.lock().expect("no panic holds it")
    }

    /// Runs `attempt` if the breaker lets it, and records whether `succeeded`
    /// says it did; `None` when the breaker refused (the attempt never ran).
    pub async fn around<T>(
        &self,
        attempt: impl Future<Output = T>,
        succeeded: impl FnOnce(&T) -> bool,
    ) -> Option<T> {
        let permit = self.breaker().try_acquire(self.now_ms())?;
        let outcome = attempt.await;
        let success = succeeded(&outcome);
        let now_ms = self.now_ms();
        self.breaker().record(permit, now_ms, success);
        Some(outcome)
    }

    /// When the breaker opened, in production seconds since `epoch`.
    pub fn opened_s(&self) -> Vec<f64> {
        self.breaker()
            .transitions()
            .iter()
            .filter(|(_, state)| *state == BreakerState::Open)
            .map(|(at_ms, _)| *at_ms as f64 / 1000.0)
            .collect()
    }
}

/// The pause before retry number `retry` (1 for the first): uniform between
/// zero and `base * 2^retry`, capped.
pub fn full_jitter(retry: u32, base: Duration, cap: Duration, rng: &mut SplitMix64) -> Duration {
    let millis = |duration: Duration| duration.as_secs_f64() * 1000.0;
    let pause_ms = backoff_ms(
        Strategy::FullJitter,
        retry,
        millis(base),
        millis(cap),
        0.0,
        rng,
    );
    Duration::from_secs_f64(pause_ms / 1000.0)
}

// ANCHOR: budget
/// A retry budget: each first try earns `per_first_try` of a token (up to
/// `max_tokens`), each retry spends one. However bad things get, retries add
/// at most `per_first_try` to the load (gRPC's retry throttling and
/// Finagle's budget work the same way).
#[derive(Debug, Clone)]
pub struct RetryTokens {
    tokens: f64,
    max_tokens: f64,
    per_first_try: f64,
}

impl RetryTokens {
    /// A full budget.
    pub fn new(max_tokens: f64, per_first_try: f64) -> RetryTokens {
        RetryTokens {
            tokens: max_tokens,
            max_tokens,
            per_first_try,
        }
    }

    pub fn earn(&mut self) {
        self.tokens = (self.tokens + self.per_first_try).min(self.max_tokens);
    }

    pub fn try_spend(&mut self) -> bool {
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}
// ANCHOR_END: budget

/// A caller's tries at one provider: one client, one URL, a timeout on each
/// try, and how many retries may follow the first.
pub struct Attempts {
    client: reqwest::Client,
    url: String,
    per_try: Duration,
    pub retries: u32,
}

impl Attempts {
    pub fn new(url: String, per_try: Duration, retries: u32) -> Result<Attempts> {
        let client = reqwest::Client::builder()
            .build()
            .context("building the client")?;
        Ok(Attempts {
            client,
            url,
            per_try,
            retries,
        })
    }

    /// One try: whether a 2xx came back within the timeout. The request is
    /// built now, so the future owns it and outlives `self`'s borrow.
    pub fn once(&self) -> impl Future<Output = bool> + Send + 'static {
        let request = self.client.get(&self.url).timeout(self.per_try);
        async move { matches!(request.send().await, Ok(response) if response.status().is_success()) }
    }
}
