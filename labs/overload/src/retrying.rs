//! Retrying, shared by the storm, the breakers and the outbound guard: a
//! retry budget, and the full-jitter pause before a retry.

use std::time::Duration;

use backoff_sim::{SplitMix64, Strategy, backoff_ms};

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
