//! tower-http 0.7's timeouts under axum, on real sockets. Read in tower-http's
//! source at the pinned version: `timeout/service.rs` races the inner future
//! against a sleep and, when the sleep wins, drops the inner future and
//! answers the status given to `with_status_code`; `timeout/body.rs` makes
//! the request body fail with `TimeoutError` when no frame comes in time,
//! which axum's `Bytes` extractor turns into 400 Bad Request.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    http::StatusCode,
    routing::{get, post},
};
use lab_facts::{PATIENCE, RawPeer, bounded};
use lab_kit::server::spawn_axum;
use tower_http::timeout::{RequestBodyTimeoutLayer, TimeoutLayer};

const BOUND: Duration = Duration::from_secs(20);

#[tokio::test]
async fn timeout_layer_answers_its_status_and_drops_the_handler() {
    bounded("TimeoutLayer", BOUND, async {
        struct SetOnDrop(Arc<AtomicBool>);
        impl Drop for SetOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = dropped.clone();
        let app = Router::new()
            .route(
                "/",
                get(move || {
                    let guard = SetOnDrop(flag.clone());
                    async move {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        drop(guard);
                        "never"
                    }
                }),
            )
            .layer(TimeoutLayer::with_status_code(
                StatusCode::SERVICE_UNAVAILABLE,
                Duration::from_millis(200),
            ));
        let server = spawn_axum(app).await.expect("the server starts");
        let answer = reqwest::Client::new()
            .get(server.url("/"))
            .timeout(PATIENCE)
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            dropped.load(Ordering::SeqCst),
            "the handler's future was dropped"
        );
    })
    .await;
}

#[tokio::test]
async fn a_stalled_body_under_the_body_timeout_is_a_400_from_axum() {
    bounded("RequestBodyTimeoutLayer", BOUND, async {
        let app = Router::new()
            .route(
                "/",
                post(|body: Bytes| async move { body.len().to_string() }),
            )
            .layer(RequestBodyTimeoutLayer::new(Duration::from_millis(200)));
        let server = spawn_axum(app).await.expect("the server starts");
        let mut peer = RawPeer::connect(server.addr).await;
        peer.send(b"POST / HTTP/1.1\r\nHost: facts\r\nContent-Length: 100\r\n\r\nabc")
            .await;
        peer.read_until("\r\n\r\n").await;
        // Not 408: the extractor reports any body error as a bad request.
        assert!(peer.text().starts_with("HTTP/1.1 400"), "{:?}", peer.text());
    })
    .await;
}
