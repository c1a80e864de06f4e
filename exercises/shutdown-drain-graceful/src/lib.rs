//! # Exercise: a SIGTERM handler that cuts the requests in flight
//!
//! The orchestrator stops this service with SIGTERM on every deploy, and
//! then waits up to its grace period before SIGKILL. The team added a
//! SIGTERM handler so the process exits 0 instead of dying of the signal,
//! yet every deploy still shows a burst of 502s from the balancer.
//!
//! Verify: `cargo xtask exercise verify shutdown-drain-graceful`.

use axum::Router;
use tokio::{
    net::TcpListener,
    signal::unix::{SignalKind, signal},
};

/// Serves `app` on `listener` until the orchestrator sends SIGTERM.
pub async fn serve(listener: TcpListener, app: Router) -> std::io::Result<()> {
    let mut sigterm = signal(SignalKind::terminate())?;
    // TODO: when SIGTERM wins this race, what happens to the requests that
    // are still being answered? What should stop first, and what should be
    // waited for, before this function returns?
    tokio::select! {
        served = axum::serve(listener, app).into_future() => served,
        _ = sigterm.recv() => Ok(()),
    }
}
