//! The fix for part 5: a maximum connection age for reqwest, which has none
//! (neither has hyper-util's pool). reqwest cannot close one pooled
//! connection from outside, so the wrapper bounds the age of the whole pool:
//! past `max_age` the next caller gets a freshly built `Client`, whose first
//! request looks the name up again. The old client's connections close when
//! the last request still using them ends and its clone is dropped.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

// ANCHOR: max_age
/// A `reqwest::Client` that is replaced once it is `max_age` old.
pub struct MaxAgeClient {
    max_age: Duration,
    build: Box<dyn Fn() -> reqwest::Result<reqwest::Client> + Send + Sync>,
    current: Mutex<(reqwest::Client, Instant)>,
}

impl MaxAgeClient {
    pub fn new(
        max_age: Duration,
        build: impl Fn() -> reqwest::Result<reqwest::Client> + Send + Sync + 'static,
    ) -> Result<MaxAgeClient> {
        let first = build().context("building the first client")?;
        Ok(MaxAgeClient {
            max_age,
            build: Box::new(build),
            current: Mutex::new((first, Instant::now())),
        })
    }

    /// The client to send with now: the current one, or a new one if the
    /// current one has reached its age. Cloning a `Client` is cheap (an `Arc`).
    pub fn client(&self) -> Result<reqwest::Client> {
        let mut current = self.current.lock().expect("the client lock");
        if current.1.elapsed() >= self.max_age {
            *current = (
                (self.build)().context("building a new client")?,
                Instant::now(),
            );
        }
        Ok(current.0.clone())
    }
}
// ANCHOR_END: max_age
