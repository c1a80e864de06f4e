//! The solution: readiness goes first. On SIGTERM `/readyz` answers 503 at
//! once; the server keeps serving for `drain_wait`, long enough for the
//! balancer's next poll to see the 503 and stop routing here; only then does
//! it stop accepting and drain. By the time a connection is refused, nobody
//! sends to it any more.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use axum::{Router, extract::State, http::StatusCode, routing::get};
use tokio::{
    net::TcpListener,
    signal::unix::{Signal, SignalKind, signal},
};

type Ready = Arc<AtomicBool>;

async fn readyz(State(ready): State<Ready>) -> (StatusCode, &'static str) {
    if ready.load(Ordering::SeqCst) {
        (StatusCode::OK, "ready\n")
    } else {
        // Not ready is not dead: the balancer leaves, nobody restarts us.
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n")
    }
}

/// Resolves when the listener may close: SIGTERM, readiness 503, the wait.
async fn leave_then_stop(mut sigterm: Signal, ready: Ready, drain_wait: Duration) {
    sigterm.recv().await;
    ready.store(false, Ordering::SeqCst);
    tokio::time::sleep(drain_wait).await;
}

/// Serves `app`, plus `/readyz` for the balancer, until SIGTERM; then drains.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    drain_wait: Duration,
) -> std::io::Result<()> {
    let ready: Ready = Arc::new(AtomicBool::new(true));
    let sigterm = signal(SignalKind::terminate())?;
    let app = app.route("/readyz", get(readyz).with_state(ready.clone()));
    let stop = leave_then_stop(sigterm, ready, drain_wait);
    axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await
}
