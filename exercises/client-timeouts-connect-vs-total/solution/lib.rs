//! The solution: two timeouts that each bound one kind of waiting, instead
//! of one deadline on the whole transfer. `connect_timeout` fails a dead host
//! at the handshake. `read_timeout` (reqwest 0.13) starts with the request,
//! so it also bounds the wait for the response head, and then restarts after
//! every chunk of the body that arrives: a stalled transfer fails, a slow one
//! that keeps moving does not. A caller with a deadline of its own adds a
//! total `timeout` sized for the largest legitimate body.

use std::time::Duration;

/// The client for the reporting API. `give_up_after` is how long it may
/// wait on a dead host, or on a transfer that has stopped moving (5 s in
/// production); a transfer that keeps moving may take as long as it takes.
pub fn reports_client(give_up_after: Duration) -> reqwest::Result<reqwest::Client> {
    let builder = reqwest::Client::builder().no_proxy();
    builder
        .connect_timeout(give_up_after)
        .read_timeout(give_up_after)
        .build()
}
