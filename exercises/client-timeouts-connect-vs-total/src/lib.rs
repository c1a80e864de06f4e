//! # Exercise: a short total timeout that kills healthy downloads
//!
//! A service downloads report exports from a reporting API that streams
//! them as it computes them: a large export takes minutes, with bytes
//! arriving steadily. After an outage in which requests to a dead host hung,
//! the team gave the client a short timeout. Now the dead host fails fast,
//! and every large export fails too.
//!
//! Verify: `cargo xtask exercise verify client-timeouts-connect-vs-total`.

use std::time::Duration;

/// The client for the reporting API. `give_up_after` is how long it may
/// wait on a dead host, or on a transfer that has stopped moving (5 s in
/// production); a transfer that keeps moving may take as long as it takes.
pub fn reports_client(give_up_after: Duration) -> reqwest::Result<reqwest::Client> {
    // TODO: reqwest's `timeout` is one deadline for the whole request, body
    // included. Which of its other timeouts bound the connect alone, and the
    // time between two reads?
    reqwest::Client::builder()
        .no_proxy()
        .timeout(give_up_after)
        .build()
}
