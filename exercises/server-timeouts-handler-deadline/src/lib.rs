//! # Exercise: a handler with no deadline
//!
//! The report route calls a database that sometimes hangs. The balancer in
//! front gives up after 60 s and answers its client 504; the service was
//! meant to answer first, at `deadline` (15 s in production), and to stop the
//! work. Someone added a tower-http timeout layer for that.
//!
//! Verify: `cargo xtask exercise verify server-timeouts-handler-deadline`.

use std::time::Duration;

use axum::Router;
use tower_http::timeout::RequestBodyTimeoutLayer;

/// The service's routes, with the limit every request must keep.
pub fn with_deadline(routes: Router, deadline: Duration) -> Router {
    // TODO: which part of a request does this layer time? What happens to a
    // GET whose handler never returns, and what should the client get back
    // at the deadline instead?
    routes.layer(RequestBodyTimeoutLayer::new(deadline))
}
