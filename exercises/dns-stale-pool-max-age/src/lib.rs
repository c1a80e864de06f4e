//! # Exercise: a pool that outlives a DNS switch
//!
//! A service sends a steady stream of requests to `shop.lab.test`. The shop
//! team deploys blue/green: they switch the DNS record to the green fleet
//! and, once the record's TTL has passed, expect the blue one to go quiet.
//! It does not. The service's team had given its client a
//! `pool_idle_timeout` to pick up DNS changes.
//!
//! Verify: `cargo xtask exercise verify dns-stale-pool-max-age`.

use std::time::Duration;

use anyhow::Result;

/// The shop's client, shared by every request the service sends there.
pub struct ShopClient {
    client: reqwest::Client,
}

impl ShopClient {
    /// `base` is how the service configures its clients (resolver, TLS,
    /// timeouts); `max_age` is how long a connection may go on talking to
    /// the address it was made to.
    pub fn new(
        base: impl Fn() -> reqwest::ClientBuilder + Send + Sync + 'static,
        max_age: Duration,
    ) -> Result<ShopClient> {
        // TODO: when does an idle timeout fire on a connection that carries a
        // request every few milliseconds? And when does a pooled connection
        // ever look the name up again?
        let client = base().pool_idle_timeout(max_age).build()?;
        Ok(ShopClient { client })
    }

    /// The client to send the next request with.
    pub fn client(&self) -> Result<reqwest::Client> {
        Ok(self.client.clone())
    }
}
