//! # Exercise: a client pool that loses the race with the API
//!
//! A service calls an orders API that closes connections idle for 30 s.
//! reqwest keeps idle connections for 90 s by default, so the team set the
//! client's `pool_idle_timeout` to the API's 30 s. Now and then a request
//! still fails with "connection closed before message completed", always
//! after a quiet spell.
//!
//! Verify: `cargo xtask exercise verify keepalive-race-client-pool-idle`.

use std::time::Duration;

/// The client for the orders API. `api_idle` is how long the API keeps an
/// idle connection open (30 s in production).
pub fn orders_client(api_idle: Duration) -> reqwest::Result<reqwest::Client> {
    // TODO: the API closes at `api_idle` after its last response; the pool
    // counts from when that response arrived, a one-way trip later, and the
    // next request needs another one-way trip to get there. Which side must
    // drop an idle connection first, and by how much?
    reqwest::Client::builder()
        .no_proxy()
        .pool_idle_timeout(api_idle)
        .build()
}
