//! The solution: a total timeout, which runs from the connect to the last
//! byte of the body, so a request to an upstream that accepted and went
//! silent ends at the caller's deadline with a timeout error. A connect
//! timeout covers the handshake only (and never runs for a pooled
//! connection); a short one stays, so that a dead address fails fast.

use std::time::Duration;

/// The client for the inventory API. `deadline` is how long a caller can
/// wait for an answer (30 s in production).
pub fn inventory_client(deadline: Duration) -> reqwest::Result<reqwest::Client> {
    let builder = reqwest::Client::builder().no_proxy();
    // 30 s for the whole request, 3 s of it for the handshake.
    builder
        .timeout(deadline)
        .connect_timeout(deadline / 10)
        .build()
}
