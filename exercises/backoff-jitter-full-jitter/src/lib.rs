//! # Exercise: backoff that retries in lockstep
//!
//! Every instance of a service calls the same dependency. When the
//! dependency goes down, all of them fail at the same moment and retry with
//! capped exponential backoff: `base * 2^retry`, at most `cap`. The
//! dependency's graphs show spikes of requests at regular intervals.
//!
//! Verify: `cargo xtask exercise verify backoff-jitter-full-jitter`.

use std::time::Duration;

use seeded_rng::SplitMix64;

/// How long a caller sleeps before retry number `retry` (1 for the first).
/// `rng` is the caller's own seeded generator.
pub fn retry_delay(retry: u32, base: Duration, cap: Duration, _rng: &mut SplitMix64) -> Duration {
    // TODO: callers that failed together compute the same delay here, so when
    // do they come back? What should be random, and over which range?
    base.saturating_mul(2u32.saturating_pow(retry)).min(cap)
}
