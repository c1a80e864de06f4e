//! The solution: SIGTERM does not drop the server, it tells it to stop
//! accepting; `with_graceful_shutdown` then lets every request in flight
//! finish (with `Connection: close`) and returns once the last connection is
//! done, so the process exits 0 with nothing cut.

use axum::Router;
use tokio::{
    net::TcpListener,
    signal::unix::{SignalKind, signal},
};

/// Serves `app` on `listener` until SIGTERM, then drains.
pub async fn serve(listener: TcpListener, app: Router) -> std::io::Result<()> {
    // Installed before the first request: a SIGTERM from now on is ours.
    let mut sigterm = signal(SignalKind::terminate())?;
    let stop_accepting = async move {
        sigterm.recv().await;
    };
    axum::serve(listener, app)
        .with_graceful_shutdown(stop_accepting)
        .await
}
