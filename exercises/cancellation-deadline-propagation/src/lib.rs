//! # Exercise: a deadline that stops at the first hop
//!
//! `GET /quote` calls the pricing service. Its callers send their remaining
//! budget in a `grpc-timeout` header (`8000m`: 8 s from when the request
//! arrives); the team also gave the pricing call a generous timeout of its
//! own, `own_timeout` (30 s in production), for callers that send nothing.
//!
//! Verify: `cargo xtask exercise verify cancellation-deadline-propagation`.

use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};

/// `GET /quote`: sends `pricing` (a GET to the pricing service) and answers
/// with its status, or 504 when the call fails or times out.
pub async fn quote(
    pricing: reqwest::RequestBuilder,
    headers: HeaderMap,
    own_timeout: Duration,
) -> StatusCode {
    let mut request = pricing.timeout(own_timeout);
    if let Some(id) = headers.get("x-request-id") {
        request = request.header("x-request-id", id);
    }
    // TODO: how long is the caller still waiting when this call starts, and
    // how would the pricing service know? What should the call's timeout be,
    // and what if no budget is left?
    match request.send().await {
        Ok(response) => response.status(),
        Err(_) => StatusCode::GATEWAY_TIMEOUT,
    }
}
