//! The reqwest clients the labs build again and again: one that opens a
//! fresh connection per request (a kubelet probe, a readiness poller), and a
//! GET that reads the whole body with errors that say which request failed.

use anyhow::{Context, Result};

/// A client for loopback (no proxy from the environment) that keeps no idle
/// connection, so every request opens a new one, as a kubelet probe does.
/// `what` names it in the error.
pub fn fresh_connection_client(what: &str) -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .build()
        .with_context(|| format!("building {what}"))
}

/// GETs `url` and reads the whole body; a failure says whether the request
/// or the body failed, and which (`what`: "the first request").
pub async fn get_body(client: &reqwest::Client, url: &str, what: &str) -> Result<Vec<u8>> {
    let response = client
        .get(url)
        .send()
        .await
        .with_context(|| format!("{what}: sending"))?;
    let body = response
        .bytes()
        .await
        .with_context(|| format!("{what}: reading the body"))?;
    Ok(body.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::spawn_axum;

    #[tokio::test]
    async fn a_fresh_connection_per_request_and_a_body_read_whole() {
        let app = axum::Router::new().route("/", axum::routing::get(|| async { "hello" }));
        let server = spawn_axum(app).await.unwrap();
        let client = fresh_connection_client("the test client").unwrap();
        for _ in 0..3 {
            assert_eq!(
                get_body(&client, &server.url("/"), "a GET").await.unwrap(),
                b"hello"
            );
        }
        // No idle pool: each of the three requests came on its own connection.
        assert_eq!(server.stats.accepted(), 3);
        let closed = crate::net::closed_loopback_port().unwrap();
        let error = get_body(
            &client,
            &format!("http://{}/", closed.addr()),
            "the first request",
        )
        .await
        .unwrap_err();
        assert!(
            format!("{error:#}").starts_with("the first request: sending"),
            "{error:#}"
        );
    }
}
