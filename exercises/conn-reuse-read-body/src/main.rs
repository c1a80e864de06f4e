//! The check: a pricing API on 127.0.0.1 behind the labs' counting listener
//! (`lab_kit::server::spawn_axum`) that answers every other request `503`
//! with a 64 KiB error page, 20 calls of the piece in a row through one
//! shared client, and which calls the server needed a new connection for.

use std::{process::ExitCode, time::Duration};

use anyhow::{Context, Result, ensure};
use axum::{Router, extract::Path, http::StatusCode, routing::get};
use exercise_kit::{Variant, Verdict, pick_async};
use lab_kit::server::spawn_axum;

exercise_kit::exercise!(
    "a connection can carry the next request only once the previous response was read to its \
     end: read (or drain) the body on the error path too, before returning",
);

const CALLS: u32 = 20;
/// The error page: large enough that it is still on its way when the caller
/// drops it, as in the lab's `unread-body` setup.
const ERROR_PAGE_BYTES: usize = 64 * 1024;
/// A pool that gets its connections back needs one, sometimes two.
const REUSED_AT_MOST: u64 = 5;

/// Even products have a price; odd ones get the overloaded API's 503.
async fn price_of(Path(product): Path<u32>) -> (StatusCode, String) {
    if product % 2 == 0 {
        (StatusCode::OK, format!("{product}.99"))
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "x".repeat(ERROR_PAGE_BYTES),
        )
    }
}

async fn check(variant: Variant) -> Result<Verdict> {
    let server = spawn_axum(Router::new().route("/prices/{product}", get(price_of))).await?;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("building the shared client")?;
    let mut errors = 0;
    for product in 0..CALLS {
        let url = server.url(&format!("/prices/{product}"));
        let price = pick_async!(
            variant,
            conn_reuse_read_body::price(&client, &url),
            solution::price(&client, &url),
        );
        let answer = tokio::time::timeout(Duration::from_secs(5), price)
            .await
            .with_context(|| format!("the call for product {product} still waiting after 5 s"))?
            .with_context(|| format!("the call for product {product}"))?;
        let expected = (product % 2 == 0).then(|| format!("{product}.99"));
        ensure!(
            answer == expected,
            "product {product}: expected {expected:?}, the piece returned {answer:?}"
        );
        errors += product % 2;
    }
    let accepted = server.stats.accepted();
    drop(client);
    server.stop(Duration::from_secs(1)).await?;
    Ok(if accepted <= REUSED_AT_MOST {
        Verdict::pass(format!(
            "the server accepted {accepted} connection(s) for {CALLS} calls through one shared \
             client, {errors} of them answered 503 with a 64 KiB page: every connection went \
             back to the pool, error pages included"
        ))
    } else {
        Verdict::fail(format!(
            "the server accepted {accepted} connections for {CALLS} calls through one shared \
             client, {errors} of them answered 503 with a 64 KiB error page, where a pool that \
             gets its connections back needs one or two: the connections whose error pages \
             were left unread could not go back to the pool and were closed"
        ))
    })
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
