//! Start an axum app on a loopback port the kernel picks, count its
//! connections, and stop it within a bounded time whatever its clients do.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::{Context, Result};
use tokio::{sync::oneshot, task::JoinHandle};

use crate::listener::{ConnStats, CountingListener};

/// A running server. Dropping it without [`RunningServer::stop`] aborts it.
pub struct RunningServer {
    pub addr: SocketAddr,
    pub stats: Arc<ConnStats>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl RunningServer {
    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Asks the server to shut down gracefully and waits at most `grace` for
    /// its connections to finish; past that the server task is aborted, which
    /// closes every connection it still holds.
    pub async fn stop(mut self, grace: Duration) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(mut task) = self.task.take() else {
            return Ok(());
        };
        match tokio::time::timeout(grace, &mut task).await {
            Ok(joined) => joined
                .context("the server task panicked")?
                .context("the server failed"),
            Err(_) => {
                task.abort();
                Ok(())
            }
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Serves `app` with the stock `axum::serve` on 127.0.0.1, port 0.
pub async fn spawn_axum(app: axum::Router) -> Result<RunningServer> {
    let listener = CountingListener::bind_loopback()
        .await
        .context("binding 127.0.0.1:0")?;
    let addr = axum::serve::Listener::local_addr(&listener).context("reading the bound address")?;
    let stats = listener.stats();
    let (stop_sender, stop_receiver) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop_receiver.await;
            })
            .await
    });
    Ok(RunningServer {
        addr,
        stats,
        stop: Some(stop_sender),
        task: Some(task),
    })
}
