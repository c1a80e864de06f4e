//! The dependency the service checks: a loopback HTTP server standing in for
//! its database. `GET /query` answers at once, except inside the slow window,
//! where every query takes `slow` first (a failover, a long vacuum, a lock).
//! A query is slow if it arrives inside the window, as a query queued behind
//! a lock would be.

use std::{sync::Arc, time::Duration};

use anyhow::Result;
use axum::{Router, extract::State, routing::get};
use lab_kit::server::{RunningServer, spawn_axum};
use tokio::time::Instant;

/// When the dependency is slow, and how slow.
#[derive(Debug, Clone, Copy)]
pub struct SlowWindow {
    pub from: Instant,
    pub until: Instant,
    /// How long a query takes inside the window.
    pub slow: Duration,
}

impl SlowWindow {
    pub fn is_slow(&self, at: Instant) -> bool {
        at >= self.from && at < self.until
    }
}

async fn query(State(windows): State<Arc<Vec<SlowWindow>>>) -> &'static str {
    let now = Instant::now();
    if let Some(window) = windows.iter().find(|window| window.is_slow(now)) {
        tokio::time::sleep(window.slow).await;
    }
    "1\n"
}

/// Starts the dependency on 127.0.0.1, port 0; it stops when dropped.
pub async fn start(window: SlowWindow) -> Result<RunningServer> {
    start_with(vec![window]).await
}

/// The same, slow inside any of several windows.
pub async fn start_with(windows: Vec<SlowWindow>) -> Result<RunningServer> {
    let app = Router::new()
        .route("/query", get(query))
        .with_state(Arc::new(windows));
    spawn_axum(app).await
}
