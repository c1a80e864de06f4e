//! # Exercise: a drain the balancer is never told about
//!
//! This service sits behind a balancer that polls `/readyz` and routes
//! requests only to instances that answer 200. On SIGTERM the team waits
//! `drain_wait` (one balancer poll period and then some) before stopping
//! accepting, "so the balancer has time to notice". Deploys still show
//! refused connections at the balancer.
//!
//! Verify: `cargo xtask exercise verify shutdown-drain-readiness`.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use axum::{Router, http::StatusCode, routing::get};
use tokio::{
    net::TcpListener,
    signal::unix::{SignalKind, signal},
};

/// Serves `app`, plus `/readyz` for the balancer, until SIGTERM; then drains.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    drain_wait: Duration,
) -> std::io::Result<()> {
    let ready = Arc::new(AtomicBool::new(true));
    let readiness = ready.clone();
    let app = app.route(
        "/readyz",
        get(move || async move {
            match readiness.load(Ordering::SeqCst) {
                true => (StatusCode::OK, "ready\n"),
                false => (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"),
            }
        }),
    );
    let mut sigterm = signal(SignalKind::terminate())?;
    let stop_accepting = async move {
        sigterm.recv().await;
        // TODO: this wait is for the balancer, which only knows what
        // `/readyz` tells it. What does `/readyz` answer during the wait,
        // and so what does the balancer do when the listener closes?
        tokio::time::sleep(drain_wait).await;
    };
    axum::serve(listener, app)
        .with_graceful_shutdown(stop_accepting)
        .await
}
