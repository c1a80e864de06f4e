//! The backends the lab puts behind a balancer or in front of a probe: the
//! stock `axum::serve`, hyper's HTTP/1 server with a timer (so its
//! `header_read_timeout` works, and doubles as an idle timeout), and a
//! hardened hyper server with a request body timeout and a handler deadline.
//!
//! Why the handler deadline is tower-http's layer and not tower's own: tower's
//! `TimeoutLayer` fails with an `Elapsed` error, and `Router::layer` takes
//! only services whose error is `Infallible`, so this does not compile:
//!
//! ```compile_fail,E0277
//! use std::time::Duration;
//! let app = lab_keepalive_race::backend::app()
//!     .layer(tower::timeout::TimeoutLayer::new(Duration::from_secs(15)));
//! ```
//!
//! With `HandleErrorLayer` in front, turning the error into a status, it does
//! (`tests/server_timeouts.rs` shows what a client then gets):
//!
//! ```
//! use std::time::Duration;
//! use axum::{error_handling::HandleErrorLayer, http::StatusCode};
//! use tower::{BoxError, ServiceBuilder};
//! let app = lab_keepalive_race::backend::app().layer(
//!     ServiceBuilder::new()
//!         .layer(HandleErrorLayer::new(|_: BoxError| async {
//!             StatusCode::SERVICE_UNAVAILABLE
//!         }))
//!         .layer(tower::timeout::TimeoutLayer::new(Duration::from_secs(15))),
//! );
//! ```

use std::{net::SocketAddr, time::Duration};

use anyhow::{Context, Result};
use axum::{Router, body::Bytes, http::StatusCode, routing::get, routing::post};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use lab_kit::server::{RunningServer, spawn_axum};
use tokio::{net::TcpListener, task::JoinHandle};
use tower::ServiceExt;
use tower_http::timeout::{RequestBodyTimeoutLayer, TimeoutLayer};

/// Which server, configured how.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ServerKind {
    /// `axum::serve(listener, app)`, nothing else: what most axum services run.
    AxumServe,
    /// hyper's HTTP/1 server with `TokioTimer`. `None` keeps hyper's own
    /// default header read timeout (30 s in hyper 1.x); `Some` sets it.
    HyperTimer {
        header_read_timeout: Option<Duration>,
    },
    /// hyper with a timer plus tower-http's body timeout and handler deadline.
    Hardened(Hardening),
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

/// The routes every backend serves.
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

/// hyper's HTTP/1 connection builder with a timer. Without `.timer(...)`
/// hyper skips its default 30 s header read timeout without a word, which is
/// what `axum::serve` 0.8 does (it never sets a timer); and a
/// `header_read_timeout` set without a timer panics on every connection.
pub fn http1_builder(header_read_timeout: Option<Duration>) -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new());
    if let Some(limit) = header_read_timeout {
        // Since hyper 1.6 this timer also restarts when a keep-alive
        // connection goes idle after a response: it is the idle timeout.
        builder.header_read_timeout(limit);
    }
    builder
}
// ANCHOR_END: hardened

/// A running backend on 127.0.0.1. Dropping it stops it and closes every
/// connection it holds.
pub struct Backend {
    pub addr: SocketAddr,
    // Kept for their `Drop`: both abort the server and its connections.
    _axum: Option<RunningServer>,
    _hyper: Option<AbortOnDrop>,
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Backend {
    pub async fn spawn(kind: ServerKind) -> Result<Backend> {
        match kind {
            ServerKind::AxumServe => {
                let server = spawn_axum(app()).await?;
                Ok(Backend {
                    addr: server.addr,
                    _axum: Some(server),
                    _hyper: None,
                })
            }
            ServerKind::HyperTimer {
                header_read_timeout,
            } => spawn_hyper(http1_builder(header_read_timeout), app()).await,
            ServerKind::Hardened(hardening) => {
                spawn_hyper(
                    http1_builder(Some(hardening.header_read_timeout)),
                    hardened_app(&hardening),
                )
                .await
            }
        }
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

// ANCHOR: serve
/// An accept loop that serves `app` with hyper's HTTP/1 `builder`: the few
/// lines `axum::serve` would be, with the timer it lacks.
async fn spawn_hyper(builder: hyper::server::conn::http1::Builder, app: Router) -> Result<Backend> {
    let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .await
        .context("binding 127.0.0.1:0")?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let task = tokio::spawn(async move {
        // The connections live in this set: aborting the accept task drops
        // the set, which aborts and closes every connection.
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let (stream, _peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
            };
            while connections.try_join_next().is_some() {}
            let _ = stream.set_nodelay(true);
            let router = app.clone();
            let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let router = router.clone();
                async move { router.oneshot(request).await }
            });
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            connections.spawn(async move {
                // A timeout or a client that went away ends the connection
                // with an error; for a server that is routine.
                let _ = connection.await;
            });
        }
    });
    Ok(Backend {
        addr,
        _axum: None,
        _hyper: Some(AbortOnDrop(task)),
    })
}
// ANCHOR_END: serve
