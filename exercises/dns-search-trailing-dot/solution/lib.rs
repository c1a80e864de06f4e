//! The solution: a trailing dot makes the name fully qualified. A resolver
//! appends search domains only to a name that is not, and only when it has
//! fewer dots than `ndots`; `api.payments.example.` is asked as written, once
//! (A and AAAA), with no NXDOMAIN round trips before it. (Lowering `ndots` in
//! the pod's `dnsConfig` is the other fix, for every name at once.)

use anyhow::Result;

/// The payments API's host name, fully qualified.
pub const PAYMENTS_HOST: &str = "api.payments.example.";

/// Charges `order`. `port` is the API's port (443 in production; the
/// check's server picks its own); `client` is the service's shared client.
pub async fn charge(client: &reqwest::Client, port: u16, order: u32) -> Result<String> {
    let response = client
        .post(format!("http://{PAYMENTS_HOST}:{port}/charge/{order}"))
        .send()
        .await?;
    Ok(response.error_for_status()?.text().await?)
}
