//! What a tower concurrency limit bounds under `axum::Router::layer`, with
//! the crates in Cargo.lock: the chapter's claims about them, proven.

use std::time::Duration;

use axum::{Router, routing::get};
use lab_kit::{gauge::Gauge, server::spawn_axum};
use tower::limit::{ConcurrencyLimitLayer, GlobalConcurrencyLimitLayer};

/// Six requests at once to a handler that holds for 200 ms, each on its own
/// connection (HTTP/1.1) or all on one (HTTP/2); the most that were inside
/// the handler at once.
async fn peak_inside(one_connection: bool, app: impl FnOnce(Router) -> Router) -> u64 {
    let inside = Gauge::new();
    let handler_gauge = inside.clone();
    let router = Router::new().route(
        "/",
        get(move || {
            let held = handler_gauge.enter();
            async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                drop(held);
            }
        }),
    );
    let server = spawn_axum(app(router)).await.expect("the server starts");
    let url = server.url("/");
    let shared = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .expect("an HTTP/2 client");
    let mut calls = Vec::new();
    for _ in 0..6 {
        // Six clients are six connections, as six users behind one balancer.
        let client = if one_connection {
            shared.clone()
        } else {
            reqwest::Client::new()
        };
        let url = url.clone();
        calls.push(tokio::spawn(async move {
            client
                .get(url)
                .timeout(Duration::from_secs(10))
                .send()
                .await
                .expect("the server answers")
        }));
    }
    for call in calls {
        call.await.expect("the call task");
    }
    inside.peak()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_limit_under_router_layer_does_not_hold_across_connections() {
    let layer = || ConcurrencyLimitLayer::new(2);
    let six_connections = peak_inside(false, |router| router.layer(layer())).await;
    assert_eq!(six_connections, 6, "each connection met a limit of its own");
    let one_connection = peak_inside(true, |router| router.layer(layer())).await;
    assert_eq!(
        one_connection, 2,
        "one connection's requests share its limit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_concurrency_limit_under_router_layer_holds_across_connections() {
    let layer = || GlobalConcurrencyLimitLayer::new(2);
    assert_eq!(peak_inside(false, |router| router.layer(layer())).await, 2);
    assert_eq!(peak_inside(true, |router| router.layer(layer())).await, 2);
}
