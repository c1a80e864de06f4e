//! Start an axum app on a loopback port the kernel picks: with the stock
//! `axum::serve` (connections counted, stopped within a bounded grace whatever
//! its clients do), or with hyper's HTTP/1 builder and a timer in an accept
//! loop, the server `axum::serve` is not.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::{Context, Result};
use hyper::server::conn::http1;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    service::TowerToHyperService,
};
use tokio::{sync::oneshot, task::JoinHandle};

use crate::{
    listener::{ConnStats, CountingListener},
    net::{AbortOnDrop, bind_loopback, spawn_accept_loop},
};

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

// ANCHOR: timer
/// hyper's HTTP/1 connection builder with a timer. Without `.timer(...)`
/// hyper skips its default 30 s header read timeout without a word, which is
/// what `axum::serve` 0.8 does (it never sets a timer); and a
/// `header_read_timeout` set without a timer panics on every connection.
pub fn http1_builder(header_read_timeout: Option<Duration>) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new());
    if let Some(limit) = header_read_timeout {
        // Since hyper 1.6 this timer also restarts when a keep-alive
        // connection goes idle after a response: it is the idle timeout.
        builder.header_read_timeout(limit);
    }
    builder
}
// ANCHOR_END: timer

/// A hyper server started by [`spawn_hyper`]. Dropping it stops the accept
/// loop and closes every connection it holds.
pub struct HyperServer {
    pub addr: SocketAddr,
    _accept: AbortOnDrop,
}

impl HyperServer {
    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

// ANCHOR: serve
/// Serves `app` on 127.0.0.1, port 0, with hyper's HTTP/1 `builder`: the few
/// lines `axum::serve` would be, with the timer it lacks. The connections
/// live in the accept loop's task set, so dropping the server closes them.
pub async fn spawn_hyper(builder: http1::Builder, app: axum::Router) -> Result<HyperServer> {
    let listener = bind_loopback().await?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let accept = spawn_accept_loop(listener, move |stream, _peer| {
        let service = TowerToHyperService::new(app.clone());
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        async move {
            // A timeout or a client that went away ends the connection with
            // an error; for a server that is routine.
            let _ = connection.await;
        }
    });
    Ok(HyperServer {
        addr,
        _accept: accept,
    })
}
// ANCHOR_END: serve

/// A loopback server of either kind, for a lab that compares them: its
/// address, and the guard that stops it when dropped.
pub enum LoopbackServer {
    /// The stock `axum::serve` ([`spawn_axum`]).
    Axum(RunningServer),
    /// hyper's HTTP/1 builder in an accept loop ([`spawn_hyper`]).
    Hyper(HyperServer),
}

impl LoopbackServer {
    pub fn addr(&self) -> SocketAddr {
        match self {
            LoopbackServer::Axum(server) => server.addr,
            LoopbackServer::Hyper(server) => server.addr,
        }
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr())
    }
}

#[cfg(test)]
mod tests {
    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::TcpStream,
    };

    use super::*;

    fn app() -> axum::Router {
        axum::Router::new().route("/", axum::routing::get(|| async { "ok\n" }))
    }

    /// Sends `request` and reads until the server closes, at most `bound`;
    /// `None` if the connection was still open then.
    async fn read_until_closed(
        addr: SocketAddr,
        request: &[u8],
        bound: Duration,
    ) -> Option<String> {
        let mut stream = TcpStream::connect(addr).await.expect("connecting");
        stream.write_all(request).await.expect("sending");
        let mut received = Vec::new();
        let read = tokio::time::timeout(bound, stream.read_to_end(&mut received)).await;
        read.ok()
            .map(|_| String::from_utf8_lossy(&received).into_owned())
    }

    #[tokio::test]
    async fn hyper_with_a_timer_answers_and_closes_a_half_sent_head_at_its_timeout() {
        let timeout = Duration::from_millis(200);
        let server = spawn_hyper(http1_builder(Some(timeout)), app())
            .await
            .expect("starting hyper");
        assert!(server.addr.ip().is_loopback());
        let answered = read_until_closed(
            server.addr,
            b"GET / HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n",
            Duration::from_secs(5),
        )
        .await
        .expect("an answered request with Connection: close ends");
        assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
        let started = std::time::Instant::now();
        let half =
            read_until_closed(server.addr, b"GET / HTTP/1.1\r\n", Duration::from_secs(5)).await;
        assert!(
            half.is_some(),
            "hyper with a timer kept a half-sent head open"
        );
        assert!(started.elapsed() >= timeout, "closed before its timeout");
    }

    #[tokio::test]
    async fn dropping_a_hyper_server_closes_its_connections() {
        let server = spawn_hyper(http1_builder(None), app())
            .await
            .expect("starting hyper");
        let addr = server.addr;
        let mut stream = TcpStream::connect(addr).await.expect("connecting");
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: lab\r\n")
            .await
            .expect("sending half a head");
        // Let the accept loop take the connection before the server goes.
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(LoopbackServer::Hyper(server));
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest))
            .await
            .expect("the connection outlived its server");
        assert_eq!(read.expect("an orderly close"), 0);
    }
}
