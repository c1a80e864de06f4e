//! The solution: the client's age is bounded, not its idleness. reqwest
//! (and hyper-util's pool under it) has no maximum connection age, and a
//! connection busy every few milliseconds is never idle, so the whole client
//! is replaced once it is `max_age` old. The new client's pool is empty: its
//! first request looks the name up again and connects to what DNS says now.
//! The old client's connections close when the requests still using them end.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

use anyhow::{Result, anyhow};

/// The shop's client, shared by every request the service sends there.
pub struct ShopClient {
    base: Box<dyn Fn() -> reqwest::ClientBuilder + Send + Sync>,
    max_age: Duration,
    /// The client in use, and when it was built.
    current: Mutex<(reqwest::Client, Instant)>,
}

impl ShopClient {
    /// `base` is how the service configures its clients (resolver, TLS,
    /// timeouts); `max_age` is how long a connection may go on talking to
    /// the address it was made to.
    pub fn new(
        base: impl Fn() -> reqwest::ClientBuilder + Send + Sync + 'static,
        max_age: Duration,
    ) -> Result<ShopClient> {
        let first = base().build()?;
        Ok(ShopClient {
            base: Box::new(base),
            max_age,
            current: Mutex::new((first, Instant::now())),
        })
    }

    /// The client to send the next request with: a new one, with an empty
    /// pool, once the current one is `max_age` old. (In a fleet, add jitter
    /// to the age so that the clients do not all reconnect together.)
    pub fn client(&self) -> Result<reqwest::Client> {
        let mut current = self
            .current
            .lock()
            .map_err(|_| anyhow!("a poisoned lock"))?;
        let (client, built) = &mut *current;
        if built.elapsed() >= self.max_age {
            *client = (self.base)().build()?;
            *built = Instant::now();
        }
        Ok(client.clone())
    }
}
