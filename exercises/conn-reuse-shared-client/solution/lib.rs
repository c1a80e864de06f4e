//! The solution: the client, and with it its connection pool, is built once
//! with the `Catalog` and lives as long as it does. Each request takes an
//! idle connection from that pool when there is one, instead of starting
//! from an empty pool, and so a new connection, every time. Cloning a
//! `reqwest::Client` is cheap and shares the pool, if handlers need their own.

use anyhow::{Context, Result};

/// The partner's catalog API, built once at start-up and shared by every
/// handler of the service.
pub struct Catalog {
    client: reqwest::Client,
    base_url: String,
}

impl Catalog {
    /// `base_url` is the API's root, such as `http://127.0.0.1:8080`.
    pub fn new(base_url: &str) -> Result<Catalog> {
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .context("building the client")?;
        Ok(Catalog {
            client,
            base_url: base_url.to_string(),
        })
    }

    /// The description of item `id`.
    pub async fn item(&self, id: u32) -> Result<String> {
        let response = self
            .client
            .get(format!("{}/items/{id}", self.base_url))
            .send()
            .await?;
        Ok(response.error_for_status()?.text().await?)
    }
}
