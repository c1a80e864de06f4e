//! # Exercise: a client per request
//!
//! A service looks up items in a partner's catalog, a few hundred times a
//! second. The partner's team says almost every request arrives on a new TCP
//! connection, and the service's hosts are full of sockets in `TIME_WAIT`.
//! This is the service's catalog client.
//!
//! Verify: `cargo xtask exercise verify conn-reuse-shared-client`.

use anyhow::{Context, Result};

/// The partner's catalog API, built once at start-up and shared by every
/// handler of the service.
pub struct Catalog {
    base_url: String,
}

impl Catalog {
    /// `base_url` is the API's root, such as `http://127.0.0.1:8080`.
    pub fn new(base_url: &str) -> Result<Catalog> {
        Ok(Catalog {
            base_url: base_url.to_string(),
        })
    }

    /// The description of item `id`.
    pub async fn item(&self, id: u32) -> Result<String> {
        // TODO: every call builds a client here. Where does reqwest keep the
        // connections it could reuse, and how long does this one live?
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .context("building the client")?;
        let url = format!("{}/items/{id}", self.base_url);
        let response = client.get(url).send().await?.error_for_status()?;
        Ok(response.text().await?)
    }
}
