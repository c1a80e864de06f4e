//! The servers the lab compares: the stock `axum::serve`, hyper's HTTP/1
//! server with a timer (so its `header_read_timeout` works, and doubles as an
//! idle timeout), and a hardened hyper server with a request body timeout and
//! a handler deadline. The starters are the kit's (`lab_kit::server`).
//!
//! Why the handler deadline is tower-http's layer and not tower's own: tower's
//! `TimeoutLayer` fails with an `Elapsed` error, and `Router::layer` takes
//! only services whose error is `Infallible`, so this does not compile:
//!
//! ```compile_fail,E0277
//! use std::time::Duration;
//! let app = lab_server_timeouts::servers::app()
//!     .layer(tower::timeout::TimeoutLayer::new(Duration::from_secs(15)));
//! ```
//!
//! With `HandleErrorLayer` in front, turning the error into a status, it does
//! (`tests/server-timeouts/handler_deadline.rs` shows what a client then gets):
//!
//! ```
//! use std::time::Duration;
//! use axum::{error_handling::HandleErrorLayer, http::StatusCode};
//! use tower::{BoxError, ServiceBuilder};
//! let app = lab_server_timeouts::servers::app().layer(
//!     ServiceBuilder::new()
//!         .layer(HandleErrorLayer::new(|_: BoxError| async {
//!             StatusCode::SERVICE_UNAVAILABLE
//!         }))
//!         .layer(tower::timeout::TimeoutLayer::new(Duration::from_secs(15))),
//! );
//! ```

use std::time::Duration;

use anyhow::Result;
use axum::{Router, body::Bytes, http::StatusCode, routing::get, routing::post};
use lab_kit::{
    Series,
    server::{LoopbackServer, http1_builder, spawn_axum, spawn_hyper},
};
use tower_http::timeout::{RequestBodyTimeoutLayer, TimeoutLayer};

/// Which server, configured how.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ServerSetup {
    /// `axum::serve(listener, app)`, nothing else: what most axum services run.
    AxumServe,
    /// hyper's HTTP/1 server with `TokioTimer` and this header read timeout.
    HyperTimer { header_read_timeout: Duration },
    /// hyper with a timer plus tower-http's body timeout and handler deadline.
    Hardened(Hardening),
    /// hyper with a timer and nothing configured: hyper's own 30 s default,
    /// which the lab can only watch in real time.
    HyperDefault,
}

impl Series for ServerSetup {
    fn series(&self) -> String {
        match self {
            ServerSetup::AxumServe => "axum-serve",
            ServerSetup::HyperTimer { .. } => "hyper-timer",
            ServerSetup::Hardened(_) => "hardened",
            ServerSetup::HyperDefault => "hyper-default-real-time",
        }
        .to_string()
    }
}

impl ServerSetup {
    /// Starts the server on 127.0.0.1, port 0; dropping it stops it.
    pub async fn spawn(&self) -> Result<LoopbackServer> {
        Ok(match self {
            ServerSetup::AxumServe => LoopbackServer::Axum(spawn_axum(app()).await?),
            ServerSetup::HyperTimer {
                header_read_timeout,
            } => LoopbackServer::Hyper(
                spawn_hyper(http1_builder(Some(*header_read_timeout)), app()).await?,
            ),
            ServerSetup::Hardened(hardening) => LoopbackServer::Hyper(
                spawn_hyper(
                    http1_builder(Some(hardening.header_read_timeout)),
                    hardened_app(hardening),
                )
                .await?,
            ),
            ServerSetup::HyperDefault => {
                LoopbackServer::Hyper(spawn_hyper(http1_builder(None), app()).await?)
            }
        })
    }
}

/// The three timeouts of the hardened server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hardening {
    /// How long hyper waits for a complete request head. The same timer runs
    /// while a keep-alive connection sits idle, so this is also the idle
    /// timeout: keep it above the balancer's idle timeout.
    pub header_read_timeout: Duration,
    /// How long a request body may go without sending a byte.
    pub request_body_timeout: Duration,
    /// How long a handler may run before the client gets a 503.
    pub handler_deadline: Duration,
}

/// The routes every server serves.
///
/// - `GET /`: a short answer.
/// - `POST /upload`: reads the whole body, then answers with its size.
/// - `GET /hang`: a handler that never finishes.
pub fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "ok\n" }))
        .route(
            "/upload",
            post(|body: Bytes| async move { format!("{} bytes\n", body.len()) }),
        )
        .route(
            "/hang",
            get(|| async {
                std::future::pending::<()>().await;
                "unreachable\n"
            }),
        )
}

// ANCHOR: hardened
/// The app with the two tower-http timeouts hyper does not have: a body that
/// stops sending fails the extractor (the client gets an error answer), and a
/// handler past its deadline is dropped (cancelled) and answered with 503.
pub fn hardened_app(hardening: &Hardening) -> Router {
    app()
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            hardening.handler_deadline,
        ))
        .layer(RequestBodyTimeoutLayer::new(hardening.request_body_timeout))
}
// ANCHOR_END: hardened
