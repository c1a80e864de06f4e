//! # Exercise: a concurrency limit with an endless queue behind it
//!
//! The work route can run `workers` requests at once (each takes about
//! 100 ms), so the team put a concurrency limit in front of it. When a burst
//! arrives, the service does not fall over, but every request in it gets
//! slow, and clients time out and retry into the same line.
//!
//! Verify: `cargo xtask exercise verify overload-shed`.

use axum::Router;
use tower::limit::GlobalConcurrencyLimitLayer;

/// Wraps the work routes in the service's admission policy.
pub fn admit(work: Router, workers: usize) -> Router {
    // TODO: `workers` requests run; where does request number `workers + 1`
    // wait, for how long, and what could it be told instead, at once?
    work.layer(GlobalConcurrencyLimitLayer::new(workers))
}
