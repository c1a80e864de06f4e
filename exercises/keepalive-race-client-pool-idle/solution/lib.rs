//! The solution: the pool drops an idle connection well before the API
//! closes it. The API's idle timer starts when it sends a response, and a
//! request the pool sends later arrives a round trip after that timer's
//! view of "idle" began; with the same timeout on both sides, a request can
//! reach a connection the API has just closed. Half the API's timeout leaves
//! far more than a round trip, and the pool opens a fresh connection instead.

use std::time::Duration;

/// The client for the orders API. `api_idle` is how long the API keeps an
/// idle connection open (30 s in production).
pub fn orders_client(api_idle: Duration) -> reqwest::Result<reqwest::Client> {
    // 15 s behind the API's 30 s: the client is the side that closes.
    let pool_idle = api_idle / 2;
    reqwest::Client::builder()
        .no_proxy()
        .pool_idle_timeout(pool_idle)
        .build()
}
