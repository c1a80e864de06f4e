//! axum 0.8's `serve` and `Router`, on real sockets. Read in axum's source at
//! the pinned version: `serve/mod.rs` builds hyper-util's
//! `auto::Builder::new(TokioExecutor::new())` per connection and never sets a
//! timer, and `with_graceful_shutdown` is axum's (it calls hyper's
//! `graceful_shutdown` on each connection and waits for them); in
//! `routing/mod.rs`, `Router<()>` as the per-connection make-service returns
//! `self.clone().with_state(())`, and `with_state` is where a handler's route,
//! with the layers given to `Router::layer` before it, is built. So a layer's
//! state (a semaphore) is made once per connection, unless `with_state` or
//! `into_make_service` (which calls it) ran once, after the layer.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use axum::{Router, routing::get};
use lab_facts::{PATIENCE, RawPeer, bounded};
use lab_kit::{gauge::Gauge, net::bind_loopback, server::spawn_axum};
use tokio::sync::oneshot;
use tower::limit::ConcurrencyLimitLayer;

const BOUND: Duration = Duration::from_secs(20);

#[tokio::test]
async fn serve_never_times_out_a_connection() {
    bounded("axum::serve idle and half head", BOUND, async {
        let server = spawn_axum(Router::new().route("/", get(|| async { "hello" })))
            .await
            .expect("the server starts");
        let mut idle = RawPeer::connect(server.addr).await;
        idle.send(b"GET / HTTP/1.1\r\nHost: facts\r\n\r\n").await;
        idle.read_until("hello").await;
        let mut half = RawPeer::connect(server.addr).await;
        half.send(b"GET / HTTP/1.1\r\nHost: facts\r\n").await;
        // hyper with a timer would close both at its 30 s default; without
        // one nothing ever does. Two seconds cannot prove "never", so the
        // hyper tests prove the mechanism: no timer, no timeout.
        let (idle_closed, half_closed) = tokio::join!(
            idle.closed_within(Duration::from_secs(2)),
            half.closed_within(Duration::from_secs(2))
        );
        assert_eq!((idle_closed, half_closed), (None, None));
    })
    .await;
}

/// Six requests at once, each on its own connection, to a handler that holds
/// 300 ms under a `ConcurrencyLimitLayer` of 2 given to `Router::layer`,
/// served as `serve_it` says; the most that were inside at once.
async fn peak_under_a_limit_of_two(shared_state: bool) -> u64 {
    let inside = Gauge::new();
    let gauge = inside.clone();
    let router = Router::new()
        .route(
            "/",
            get(move || {
                let held = gauge.enter();
                async move {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    drop(held);
                }
            }),
        )
        .layer(ConcurrencyLimitLayer::new(2));
    let listener = bind_loopback().await.expect("binding");
    let addr = listener.local_addr().expect("address");
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.await;
        };
        if shared_state {
            axum::serve(listener, router.into_make_service())
                .with_graceful_shutdown(shutdown)
                .await
        } else {
            axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await
        }
    });
    let calls: Vec<_> = (0..6)
        .map(|_| {
            // A client each: six connections, as six users behind a balancer.
            let request = reqwest::Client::new()
                .get(format!("http://{addr}/"))
                .timeout(PATIENCE)
                .send();
            tokio::spawn(request)
        })
        .collect();
    for call in calls {
        call.await.expect("the task").expect("an answer");
    }
    let _ = stop.send(());
    let _ = tokio::time::timeout(PATIENCE, server).await;
    inside.peak()
}

#[tokio::test]
async fn a_concurrency_limit_under_router_layer_is_one_per_connection() {
    bounded("limit per connection", BOUND, async {
        assert_eq!(peak_under_a_limit_of_two(false).await, 6);
    })
    .await;
}

#[tokio::test]
async fn into_make_service_shares_one_limit_across_connections() {
    bounded("limit shared", BOUND, async {
        assert_eq!(peak_under_a_limit_of_two(true).await, 2);
    })
    .await;
}

#[tokio::test]
async fn graceful_shutdown_lets_the_request_in_flight_finish() {
    bounded("graceful shutdown", BOUND, async {
        let (entered_sender, entered) = oneshot::channel::<()>();
        let entered_sender = Arc::new(std::sync::Mutex::new(Some(entered_sender)));
        let app = Router::new().route(
            "/",
            get(move || {
                if let Some(entered) = entered_sender.lock().expect("not poisoned").take() {
                    let _ = entered.send(());
                }
                async {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    "finished"
                }
            }),
        );
        let server = spawn_axum(app).await.expect("the server starts");
        let request = tokio::spawn(reqwest::Client::new().get(server.url("/")).send());
        entered.await.expect("the handler started");
        // Stop with a grace longer than the handler: axum waits for it.
        server.stop(PATIENCE).await.expect("a clean stop");
        let answer = request
            .await
            .expect("the task")
            .expect("an answer, not a reset");
        assert_eq!(answer.text().await.expect("the body"), "finished");
    })
    .await;
}

#[tokio::test]
async fn a_handler_is_dropped_when_its_client_leaves() {
    bounded("client disconnect", BOUND, async {
        struct SetOnDrop(Arc<AtomicBool>);
        impl Drop for SetOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let (entered_sender, entered) = oneshot::channel::<()>();
        let entered_sender = Arc::new(std::sync::Mutex::new(Some(entered_sender)));
        let flag = dropped.clone();
        let app = Router::new().route(
            "/",
            get(move || {
                let guard = SetOnDrop(flag.clone());
                if let Some(entered) = entered_sender.lock().expect("not poisoned").take() {
                    let _ = entered.send(());
                }
                async move {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    drop(guard);
                    "never"
                }
            }),
        );
        let server = spawn_axum(app).await.expect("the server starts");
        let mut peer = RawPeer::connect(server.addr).await;
        peer.send(b"GET / HTTP/1.1\r\nHost: facts\r\n\r\n").await;
        entered.await.expect("the handler started");
        drop(peer);
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !dropped.load(Ordering::SeqCst) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            dropped.load(Ordering::SeqCst),
            "the handler's future was dropped at its await"
        );
    })
    .await;
}
