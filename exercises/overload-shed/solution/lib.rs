//! The solution: load shedding over the limit. `load_shed` asks the limit
//! whether a worker is free *now*; when none is, it fails the request at
//! once instead of queueing it, and the error handler turns that into a 503
//! with `Retry-After`. The requests that are admitted start at once and take
//! their 100 ms; the rest learn in a millisecond that they should come back
//! later (or go to another replica).

use axum::{
    BoxError, Router,
    error_handling::HandleErrorLayer,
    http::{StatusCode, header::RETRY_AFTER},
};
use tower::{ServiceBuilder, limit::GlobalConcurrencyLimitLayer};

/// Wraps the work routes in the service's admission policy.
pub fn admit(work: Router, workers: usize) -> Router {
    let shed_when_full = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(|_: BoxError| async {
            (StatusCode::SERVICE_UNAVAILABLE, [(RETRY_AFTER, "1")])
        }))
        .load_shed()
        .layer(GlobalConcurrencyLimitLayer::new(workers));
    work.layer(shed_when_full)
}
