//! # Exercise: retries with no budget
//!
//! Every call this client makes to its dependency retries a 5xx or a failed
//! connection, up to four attempts in all. That covers the odd transient
//! failure. Then the dependency went down for everyone, and its load went up
//! fourfold just as it tried to come back.
//!
//! Verify: `cargo xtask exercise verify backoff-jitter-retry-budget`.

use std::time::Duration;

use reqwest::StatusCode;

/// Attempts per call, the first one included.
const MAX_ATTEMPTS: u32 = 4;

/// The client's calls to its dependency. One value serves every call.
pub struct Retrying {
    client: reqwest::Client,
}

impl Retrying {
    pub fn new(client: reqwest::Client) -> Retrying {
        Retrying { client }
    }

    /// GET `url`: the last status, or `None` if no attempt got one.
    pub async fn get(&self, url: &str) -> Option<StatusCode> {
        let mut last = None;
        for attempt in 1..=MAX_ATTEMPTS {
            // TODO: each call decides alone whether to retry. What bounds
            // the retries of all calls together when every call fails?
            if attempt > 1 {
                tokio::time::sleep(Duration::from_millis(5 << attempt)).await;
            }
            match self.client.get(url).send().await {
                Ok(response) if !response.status().is_server_error() => {
                    return Some(response.status());
                }
                Ok(response) => last = Some(response.status()),
                Err(_) => {}
            }
        }
        last
    }
}
