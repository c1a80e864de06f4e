//! # Exercise: a name that goes through every search domain first
//!
//! A service in a Kubernetes pod charges orders through a payments API
//! outside the cluster, `api.payments.example`. The pod's resolver has
//! `ndots:5` and the cluster's search domains, as every pod does. The
//! cluster's DNS team asks why this service sends so many queries for names
//! that do not exist.
//!
//! Verify: `cargo xtask exercise verify dns-search-trailing-dot`.

use anyhow::Result;

/// The payments API's host name.
// TODO: this name has two dots, fewer than `ndots:5`. Which names does the
// resolver try before this one, and how do you tell it that a name is
// already complete?
pub const PAYMENTS_HOST: &str = "api.payments.example";

/// Charges `order`. `port` is the API's port (443 in production; the
/// check's server picks its own); `client` is the service's shared client.
pub async fn charge(client: &reqwest::Client, port: u16, order: u32) -> Result<String> {
    let url = format!("http://{PAYMENTS_HOST}:{port}/charge/{order}");
    let response = client.post(url).send().await?.error_for_status()?;
    Ok(response.text().await?)
}
