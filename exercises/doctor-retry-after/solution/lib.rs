//! The solution: `Retry-After` is either delay-seconds, a whole number of
//! seconds written in digits ("2"), or an HTTP date (RFC 9110, section
//! 10.2.3). `{:?}` of a `Duration` is "1.5s", which is neither: a client
//! that reads the header finds nothing it can parse and retries on its own
//! schedule, often at once. The refusal rounds the wait up to whole seconds
//! (coming back early finds the backlog still there) and never says 0,
//! which would send every refused caller straight back together.

use std::time::Duration;

use axum::{
    http::{StatusCode, header::RETRY_AFTER},
    response::{IntoResponse, Response},
};

/// The answer to a caller the route cannot take: 503, and when to come back.
pub fn refusal(come_back_in: Duration) -> Response {
    // Whole seconds, rounded up, at least one.
    let rounded_up = come_back_in.as_secs() + u64::from(come_back_in.subsec_nanos() > 0);
    let seconds = rounded_up.max(1);
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(RETRY_AFTER, seconds.to_string())],
        "busy\n",
    )
        .into_response()
}
