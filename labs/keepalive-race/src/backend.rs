//! The backends the lab puts behind a balancer or in front of a probe: the
//! stock `axum::serve`, and hyper's HTTP/1 server with a timer, so that its
//! `header_read_timeout` works and doubles as an idle timeout. Both come
//! from the kit (`lab_kit::server`); this module only says which is which.

use std::{net::SocketAddr, time::Duration};

use anyhow::Result;
use axum::{Router, routing::get};
use lab_kit::{
    Series,
    server::{LoopbackServer, http1_builder, spawn_axum, spawn_hyper},
};

/// Which backend, configured how.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BackendKind {
    /// `axum::serve(listener, app)`, nothing else: what most axum services run.
    AxumServe,
    /// hyper's HTTP/1 server with `TokioTimer` and this header read timeout,
    /// which is also its idle timeout.
    HyperTimer { header_read_timeout: Duration },
}

impl Series for BackendKind {
    fn series(&self) -> String {
        match self {
            BackendKind::AxumServe => "axum-serve",
            BackendKind::HyperTimer { .. } => "hyper-timer",
        }
        .to_string()
    }
}

/// The one route every backend serves: `GET /`, a short answer.
pub fn app() -> Router {
    Router::new().route("/", get(|| async { "ok\n" }))
}

/// A running backend on 127.0.0.1. Dropping it stops it and closes every
/// connection it holds.
pub struct Backend {
    pub addr: SocketAddr,
    _server: LoopbackServer,
}

impl Backend {
    pub async fn spawn(kind: BackendKind) -> Result<Backend> {
        let server = match kind {
            BackendKind::AxumServe => LoopbackServer::Axum(spawn_axum(app()).await?),
            BackendKind::HyperTimer {
                header_read_timeout,
            } => LoopbackServer::Hyper(
                spawn_hyper(http1_builder(Some(header_read_timeout)), app()).await?,
            ),
        };
        Ok(Backend {
            addr: server.addr(),
            _server: server,
        })
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}
