//! The solution: full jitter. The capped exponential is only the window; the
//! sleep is drawn uniformly from all of it, so callers that failed together
//! come back at different moments, and the load on a recovering dependency
//! is spread instead of arriving as one spike per retry.

use std::time::Duration;

use seeded_rng::SplitMix64;

/// How long a caller sleeps before retry number `retry` (1 for the first).
/// `rng` is the caller's own seeded generator.
pub fn retry_delay(retry: u32, base: Duration, cap: Duration, rng: &mut SplitMix64) -> Duration {
    let mut window = base;
    for _ in 0..retry {
        if window >= cap {
            break;
        }
        window *= 2;
    }
    window.min(cap).mul_f64(rng.unit())
}
