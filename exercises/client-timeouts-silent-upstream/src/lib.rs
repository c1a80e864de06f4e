//! # Exercise: an upstream that accepts and never answers
//!
//! A service asks an inventory API for stock levels. One night the API's
//! process wedges: its port still accepts connections and reads requests,
//! but nothing answers. The service's requests pile up until it runs out of
//! memory, although the team had set a timeout on the client.
//!
//! Verify: `cargo xtask exercise verify client-timeouts-silent-upstream`.

use std::time::Duration;

/// The client for the inventory API. `deadline` is how long a caller can
/// wait for an answer (30 s in production).
pub fn inventory_client(deadline: Duration) -> reqwest::Result<reqwest::Client> {
    // TODO: which phases of a request does this timeout cover: the connect,
    // the wait for the response, the body? Which one is left unbounded
    // against an upstream that accepted the connection?
    reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(deadline)
        .build()
}
