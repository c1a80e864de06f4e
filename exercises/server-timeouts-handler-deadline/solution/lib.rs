//! The solution: a body timeout only times the request body (a GET has none),
//! so it never fires on a stuck handler. tower-http's `TimeoutLayer` times
//! the handler itself: at the deadline it drops the handler's future (which
//! cancels the work) and answers with the status given here, on a
//! connection that then serves the next request.

use std::time::Duration;

use axum::{Router, http::StatusCode};
use tower_http::timeout::TimeoutLayer;

/// The service's routes, with the limit every request must keep.
pub fn with_deadline(routes: Router, deadline: Duration) -> Router {
    // 503: the service, not the client, ran out of time; a balancer can
    // retry it elsewhere, and it arrives before the balancer's own 504.
    routes.layer(TimeoutLayer::with_status_code(
        StatusCode::SERVICE_UNAVAILABLE,
        deadline,
    ))
}
