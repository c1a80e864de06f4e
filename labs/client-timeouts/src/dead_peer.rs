//! Detecting a dead peer on an idle pooled connection. An HTTP/2 server
//! answers one request, then its process "freezes" on that connection: the
//! connection is never polled again, but the socket stays open, so the
//! server's kernel still ACKs everything. Four reqwest clients watch their
//! idle pooled connection: TCP keepalive, HTTP/2 PING keepalive, a short
//! pool idle timeout, and the defaults. Then each sends one more request.
//!
//! New connections are served normally, as by a restarted process, so the
//! last request shows whether the pool still held the dead connection.

use std::{net::SocketAddr, time::Duration};

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, server::conn::http2, service::service_fn};
use hyper_util::rt::{TokioExecutor, TokioIo};
use lab_kit::{
    Output, Series,
    concurrently::run_all,
    net::{AbortOnDrop, bind_loopback, spawn_accept_loop},
};
use serde::Serialize;
use tokio::{sync::watch, time::Instant};

use crate::{
    Config,
    defaults::{fd_toward, segments_and_last_ack},
    millis,
};

lab_kit::series! {
    /// How a client watches its idle connection.
    pub enum Watcher in "dead-peer" {
        TcpKeepalive => "tcp-keepalive",
        Http2Ping => "http2-ping",
        PoolIdle => "pool-idle-timeout",
        Defaults => "defaults",
    }
}

// ANCHOR: watchers
/// The clients. Kernel keepalive runs on the kernel's clock (whole seconds,
/// 1 s at least), so it is set to its shortest; the HTTP/2 and pool timers
/// are compressed like the rest of the lab.
pub fn client_for(watcher: Watcher, config: &Config) -> Result<reqwest::Client> {
    let builder = reqwest::Client::builder()
        .no_proxy()
        .http2_prior_knowledge();
    let builder = match watcher {
        // Probes after 1 s idle, every 1 s, 3 unanswered ones end it.
        Watcher::TcpKeepalive => builder
            .tcp_keepalive(Duration::from_secs(1))
            .tcp_keepalive_interval(Duration::from_secs(1))
            .tcp_keepalive_retries(3),
        // A PING frame every interval, even with no request in flight; no
        // PONG within the timeout closes the connection.
        Watcher::Http2Ping => builder
            .http2_keep_alive_interval(config.lab(config.h2_ping_interval_s))
            .http2_keep_alive_timeout(config.lab(config.h2_ping_timeout_s))
            .http2_keep_alive_while_idle(true),
        // Not a detector at all: the pool drops any connection idle this long.
        Watcher::PoolIdle => builder.pool_idle_timeout(config.lab(config.pool_idle_probe_s)),
        Watcher::Defaults => builder,
    };
    builder.build().context("building an HTTP/2 client")
}
// ANCHOR_END: watchers

/// What one watcher saw.
#[derive(Debug, Clone, Serialize)]
pub struct Watched {
    pub watcher: &'static str,
    /// The client dropped the dead connection within the watch, and when.
    pub dropped: bool,
    pub dropped_after_ms: f64,
    pub watch_ms: f64,
    /// The watcher's own timer, on the lab's clock: keepalive idle plus its
    /// probes, PING interval plus timeout, or the pool's idle timeout.
    pub timer_ms: f64,
    /// TCP segments the client's socket received while the server's process
    /// was frozen (keepalive ACKs, for instance), and how long before the end
    /// of the watch the last ACK arrived; -1 once the socket is gone.
    pub segments_in: i64,
    pub last_ack_ms: i64,
    /// The request sent after the watch: answered (on a new connection) or
    /// still waiting at the lab's bound (on the dead one).
    pub next_request: String,
}

/// An HTTP/2 server whose connections accepted before `freeze` flips stop
/// being served; later connections are served normally. Dropping the guard
/// stops it and closes every connection.
async fn freezing_server(freeze: watch::Receiver<bool>) -> Result<(SocketAddr, AbortOnDrop)> {
    let listener = bind_loopback().await?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let server = spawn_accept_loop(listener, move |stream, _peer| {
        let mut frozen = freeze.clone();
        let doomed = !*frozen.borrow();
        async move {
            let service = service_fn(|_request| async {
                Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from("ok"))))
            });
            let connection = http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = &mut connection => {}
                _ = async { frozen.wait_for(|now| *now).await.is_ok() }, if doomed => {
                    // Frozen: the connection (and its socket) lives on,
                    // never polled again. The kernel keeps ACKing.
                    std::future::pending::<()>().await;
                }
            }
        }
    });
    Ok((addr, server))
}

/// One watcher against a fresh freezing server.
pub async fn watch_one(watcher: Watcher, config: &Config) -> Result<Watched> {
    let (freeze, frozen) = watch::channel(false);
    let (addr, _server) = freezing_server(frozen).await?;
    let client = client_for(watcher, config)?;
    let url = format!("http://{addr}/");
    lab_kit::client::get_body(&client, &url, "the first request").await?;
    let fd = fd_toward(addr)?.context("the client's socket")?;
    let segments_before = segments_and_last_ack(fd).map_or(0, |(segments, _)| segments);
    freeze.send_replace(true);
    let frozen_at = Instant::now();
    let watch = Duration::from_secs_f64(config.dead_peer_watch_real_s);
    let mut dropped = None;
    let (mut segments_in, mut last_ack_ms) = (-1, -1);
    while frozen_at.elapsed() < watch {
        if fd_toward(addr)?.is_none() {
            dropped = Some(frozen_at.elapsed());
            break;
        }
        if let Some((segments, last_ack)) = segments_and_last_ack(fd) {
            segments_in = i64::from(segments.wrapping_sub(segments_before));
            last_ack_ms = i64::from(last_ack);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let next = tokio::time::timeout(config.lab(config.bound_s), async {
        client.get(&url).send().await?.bytes().await
    })
    .await;
    let next_request = match next {
        Ok(Ok(_)) => "answered".to_string(),
        Ok(Err(error)) => format!("error: {}", crate::grid::error_chain(&error)),
        Err(_) => "still waiting at the bound".to_string(),
    };
    Ok(Watched {
        watcher: watcher.name(),
        dropped: dropped.is_some(),
        dropped_after_ms: millis(dropped.unwrap_or(watch)),
        watch_ms: millis(watch),
        timer_ms: millis(match watcher {
            Watcher::TcpKeepalive => Duration::from_secs(4),
            Watcher::Http2Ping => {
                config.lab(config.h2_ping_interval_s) + config.lab(config.h2_ping_timeout_s)
            }
            Watcher::PoolIdle => config.lab(config.pool_idle_probe_s),
            Watcher::Defaults => Duration::ZERO,
        }),
        segments_in,
        last_ack_ms,
        next_request,
    })
}

/// Every watcher side by side; summaries `dead-peer/<watcher>`.
pub async fn run_dead_peer(config: &Config, out: &mut Output) -> Result<()> {
    let all = run_all(Watcher::ALL, Series::series, |watcher| {
        let config = config.clone();
        async move { watch_one(watcher, &config).await }
    })
    .await?;
    for (watcher, watched) in &all {
        out.write_summary(&watcher.series(), watched)?;
    }
    Ok(())
}
