//! # Exercise: a 503 that says when to come back, in words no client reads
//!
//! The work route holds one of four database slots for about 100 ms. When
//! more than four callers are already waiting for a slot, it sheds: it
//! answers with this refusal at once, and tells the caller to come back in
//! about 1.5 s, when the backlog has cleared. The doctor's overload check
//! passes; its Retry-After check does not.
//!
//! Verify: `cargo xtask exercise verify doctor-retry-after`.

use std::time::Duration;

use axum::{
    http::{HeaderValue, StatusCode, header::RETRY_AFTER},
    response::{IntoResponse, Response},
};

/// The answer to a caller the route cannot take: 503, and when to come back.
pub fn refusal(come_back_in: Duration) -> Response {
    // TODO: what does this header say on the wire, and what does a client
    // that reads Retry-After (RFC 9110, section 10.2.3) accept there?
    let when = format!("{come_back_in:?}");
    let mut refused = (StatusCode::SERVICE_UNAVAILABLE, "busy\n").into_response();
    if let Ok(value) = HeaderValue::from_str(&when) {
        refused.headers_mut().insert(RETRY_AFTER, value);
    }
    refused
}
