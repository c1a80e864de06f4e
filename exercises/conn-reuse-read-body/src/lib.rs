//! # Exercise: an error page left unread
//!
//! A service asks a pricing API for the price of each product it shows.
//! The API is often overloaded and then answers `503` with a large HTML error
//! page; the service treats that as "no price for now". The service shares
//! one `reqwest::Client`, yet the API still sees a new connection for about
//! every other request.
//!
//! Verify: `cargo xtask exercise verify conn-reuse-read-body`.

use anyhow::Result;

/// The price of a product, or `None` when the API cannot say right now.
/// `client` is the service's one shared client.
pub async fn price(client: &reqwest::Client, url: &str) -> Result<Option<String>> {
    let response = client.get(url).send().await?;
    if !response.status().is_success() {
        // TODO: the body of this response is dropped unread. What must happen
        // before a connection can carry the next request, and so go back to
        // the pool?
        return Ok(None);
    }
    Ok(Some(response.text().await?))
}
