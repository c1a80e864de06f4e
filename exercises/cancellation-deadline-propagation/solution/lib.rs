//! The solution: the caller's `grpc-timeout` sets this request's deadline
//! (arrival + budget). The pricing call gets what is left of it minus a
//! margin for the answer's way back, as its timeout and as its own
//! `grpc-timeout`, so both this hop and the next stop when the caller stops
//! waiting; with nothing left, the request is refused without a call.

use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use lab_cancellation::grpc_timeout;

/// Time for an answer to travel back to the caller.
const MARGIN: Duration = Duration::from_millis(50);

/// `GET /quote`: sends `pricing` (a GET to the pricing service) and answers
/// with its status, or 504 when the call fails or times out.
pub async fn quote(
    pricing: reqwest::RequestBuilder,
    headers: HeaderMap,
    own_timeout: Duration,
) -> StatusCode {
    let arrived = Instant::now();
    let budget = headers
        .get(grpc_timeout::HEADER)
        .and_then(|value| grpc_timeout::parse(value.to_str().ok()?))
        .map_or(own_timeout, |budget| budget.min(own_timeout));
    let left = (arrived + budget)
        .checked_duration_since(Instant::now())
        .and_then(|left| left.checked_sub(MARGIN))
        .filter(|left| !left.is_zero());
    let Some(left) = left else {
        return StatusCode::GATEWAY_TIMEOUT;
    };
    let mut request = pricing
        .timeout(left)
        .header(grpc_timeout::HEADER, grpc_timeout::encode(left));
    if let Some(id) = headers.get("x-request-id") {
        request = request.header("x-request-id", id);
    }
    request
        .send()
        .await
        .map_or(StatusCode::GATEWAY_TIMEOUT, |response| response.status())
}
