//! hyper-util's legacy client (`hyper_util::client::legacy`): its pool's idle
//! timeout with and without a timer, and the TCP keepalive `build_http()` sets.
//! Read in hyper-util's source at the pinned version: `client/legacy/pool.rs`
//! skips an expired idle connection at checkout whatever the timer, and
//! spawns its idle reaper only when a timer is set; `client/legacy/client.rs`
//! starts `idle_timeout` at 90 s and `build_http()` hands it to
//! `HttpConnector::set_keepalive`.

use std::time::Duration;

use axum::{Router, routing::get};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::{TokioExecutor, TokioTimer},
};
use lab_facts::{PATIENCE, bounded, tcp_options_toward};
use lab_kit::server::{RunningServer, spawn_axum};

const BOUND: Duration = Duration::from_secs(20);

async fn server() -> RunningServer {
    spawn_axum(Router::new().route("/", get(|| async { "hello" })))
        .await
        .expect("the server starts")
}

fn client(idle: Option<Duration>, timer: bool) -> Client<HttpConnector, Empty<Bytes>> {
    let mut builder = Client::builder(TokioExecutor::new());
    if let Some(idle) = idle {
        builder.pool_idle_timeout(idle);
    }
    if timer {
        builder.pool_timer(TokioTimer::new());
    }
    builder.build_http()
}

async fn get_once(client: &Client<HttpConnector, Empty<Bytes>>, server: &RunningServer) {
    let request = http::Request::get(server.url("/"))
        .body(Empty::new())
        .expect("a request");
    let response = tokio::time::timeout(PATIENCE, client.request(request))
        .await
        .expect("an answer in time")
        .expect("an answer");
    response.into_body().collect().await.expect("the body");
}

#[tokio::test]
async fn without_a_timer_an_expired_idle_connection_is_dropped_at_checkout() {
    bounded("pool idle timeout, no timer", BOUND, async {
        let server = server().await;
        let client = client(Some(Duration::from_millis(200)), false);
        get_once(&client, &server).await;
        tokio::time::sleep(Duration::from_millis(800)).await;
        // Nothing reaped it: the expired connection is still open...
        assert_eq!(server.stats.open(), 1, "no reaper without a timer");
        get_once(&client, &server).await;
        // ...but checkout skipped it: the second request opened a new one.
        assert_eq!(server.stats.accepted(), 2, "the expired one was not reused");
    })
    .await;
}

#[tokio::test]
async fn with_a_pool_timer_idle_connections_are_reaped() {
    bounded("pool idle timeout, timer", BOUND, async {
        let server = server().await;
        let client = client(Some(Duration::from_millis(200)), true);
        get_once(&client, &server).await;
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while server.stats.open() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            server.stats.open(),
            0,
            "the reaper closed the idle connection"
        );
        drop(client);
    })
    .await;
}

#[tokio::test]
async fn build_http_sets_tcp_keepalive_to_the_90_s_pool_idle_timeout() {
    bounded("build_http keepalive", BOUND, async {
        let server = server().await;
        let client = client(None, false);
        get_once(&client, &server).await;
        let options = tcp_options_toward(server.addr).expect("the client's socket");
        assert!(options.keepalive, "{options:?}");
        // The pool's idle timeout, 90 s by default, as the keepalive idle;
        // interval and probes are left to the kernel (75 s and 9 here).
        assert_eq!(options.keepalive_idle_s, 90, "{options:?}");
        assert_eq!(
            options.user_timeout_ms, 0,
            "no TCP_USER_TIMEOUT: {options:?}"
        );
        assert!(!options.nodelay, "no TCP_NODELAY: {options:?}");
    })
    .await;
}
