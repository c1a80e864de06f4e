//! A proxy that buffers the request: a client sends its body slowly to
//! `axum::serve`, directly and through nginx with `proxy_request_buffering`
//! on and off. The backend notes, for each request, when its handler began
//! (the request head had arrived) and when the whole body had; the gap is
//! how long a slow client held one of the backend's handler tasks.
//!
//! nginx is not a dependency of the book: where it is not installed the
//! lab measures the direct path only and says so in one line.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use axum::{Router, extract::Request, extract::State, routing::post};
use lab_kit::{nginx::Nginx, server::spawn_axum};
use serde::Serialize;

use crate::{Config, stalled_client::RawConnection};

lab_kit::series! {
    /// The way from the slow client to the backend.
    pub enum BodyPath in "buffering" {
        /// Straight to `axum::serve`.
        Direct => "direct",
        /// Through nginx, `proxy_request_buffering on` (nginx's default).
        BufferingOn => "nginx-buffering-on",
        /// Through nginx, `proxy_request_buffering off`.
        BufferingOff => "nginx-buffering-off",
    }
}

/// The slow client's body: this many chunks of `CHUNK` bytes, spread evenly
/// over `slow_body_s`.
const CHUNKS: u32 = 10;
const CHUNK: usize = 100;

/// What the backend saw of one request, the summary `buffering/<path>`.
#[derive(Debug, Clone, Serialize)]
pub struct HeldHandler {
    pub path: String,
    /// `on`, `off`, or `no proxy`.
    pub proxy_request_buffering: String,
    /// The nginx that proxied (`nginx -v`), or `none`.
    pub nginx_version: String,
    /// How long the client took to send its body, lab ms.
    pub body_sent_over_ms: f64,
    /// When the backend's handler began, lab ms after the client's first
    /// byte: the request head had reached the backend.
    pub head_at_ms: f64,
    /// When the handler had the whole body, lab ms after the first byte.
    pub body_done_at_ms: f64,
    /// The gap: how long the handler task waited on the body, lab ms.
    pub held_ms: f64,
    pub held_production_s: f64,
    pub status: u16,
}

/// When one handler began and when it had its whole body.
type Seen = Arc<Mutex<Vec<(Instant, Instant, usize)>>>;

async fn record(State(seen): State<Seen>, request: Request) -> String {
    let began = Instant::now();
    let body = axum::body::to_bytes(request.into_body(), 1 << 20).await;
    let done = Instant::now();
    let length = body.map(|bytes| bytes.len()).unwrap_or(0);
    seen.lock()
        .expect("not poisoned")
        .push((began, done, length));
    format!("{length} bytes\n")
}

/// `POST /upload` on `axum::serve`, noting each request's timestamps.
fn recording_backend(seen: Seen) -> Router {
    Router::new()
        .route("/upload", post(record))
        .with_state(seen)
}

/// The nginx server blocks: one port per setting, each to its own backend.
fn proxies(on: (SocketAddr, SocketAddr), off: (SocketAddr, SocketAddr)) -> String {
    let server = |(listen, backend): (SocketAddr, SocketAddr), setting: &str| {
        format!(
            "  server {{ listen {listen}; location / {{ proxy_pass http://{backend}; \
             proxy_request_buffering {setting}; }} }}\n"
        )
    };
    format!("{}{}", server(on, "on"), server(off, "off"))
}

/// Sends one POST to `addr` with its body spread over `over`, reads the
/// answer; returns the first byte's instant, how long the body took, and
/// the status.
async fn slow_upload(addr: SocketAddr, over: Duration) -> Result<(Instant, Duration, u16)> {
    let mut connection = RawConnection::connect(addr, Duration::from_secs(2)).await?;
    let total = CHUNK * CHUNKS as usize;
    let head = format!(
        "POST /upload HTTP/1.1\r\nHost: lab\r\nContent-Length: {total}\r\nConnection: close\r\n\r\n"
    );
    // The head goes with the first chunk; then a chunk every gap.
    let mut bytes = head.into_bytes();
    let started = Instant::now();
    let gap = over / CHUNKS;
    for chunk in 0..CHUNKS {
        bytes.extend(std::iter::repeat_n(b'x', CHUNK));
        connection
            .send(&bytes)
            .await
            .map_err(|end| anyhow::anyhow!("sending chunk {chunk}: {end:?}"))?;
        bytes.clear();
        if chunk + 1 < CHUNKS {
            tokio::time::sleep_until((started + gap * (chunk + 1)).into()).await;
        }
    }
    let sent_over = started.elapsed();
    let answer = tokio::time::timeout(Duration::from_secs(5), connection.read_answer())
        .await
        .context("no answer within 5 s of the last chunk")?
        .map_err(|end| anyhow::anyhow!("reading the answer: {end:?}"))?;
    Ok((started, sent_over, answer.status))
}

/// One path: a backend of its own, the upload, and what the backend saw.
async fn measure(
    config: &Config,
    path: BodyPath,
    client_to: SocketAddr,
    seen: Seen,
    nginx_version: &str,
) -> Result<HeldHandler> {
    let (started, sent_over, status) = slow_upload(client_to, config.lab(config.slow_body_s))
        .await
        .with_context(|| format!("the slow upload, {}", path.name()))?;
    let seen = seen.lock().expect("not poisoned").clone();
    let [(began, done, length)] = seen[..] else {
        bail!(
            "{}: the backend saw {} requests, not 1",
            path.name(),
            seen.len()
        );
    };
    if length != CHUNK * CHUNKS as usize {
        bail!(
            "{}: the backend read {length} bytes of the body",
            path.name()
        );
    }
    let lab_ms = |at: Instant| at.saturating_duration_since(started).as_secs_f64() * 1000.0;
    let held_ms = (done - began).as_secs_f64() * 1000.0;
    Ok(HeldHandler {
        path: path.name().into(),
        proxy_request_buffering: match path {
            BodyPath::Direct => "no proxy",
            BodyPath::BufferingOn => "on",
            BodyPath::BufferingOff => "off",
        }
        .into(),
        nginx_version: nginx_version.into(),
        body_sent_over_ms: sent_over.as_secs_f64() * 1000.0,
        head_at_ms: lab_ms(began),
        body_done_at_ms: lab_ms(done),
        held_ms,
        held_production_s: config.production_s(held_ms),
        status,
    })
}

/// Every path nginx allows here, at once; only `direct` where nginx is not
/// installed (with one line on stderr saying so).
pub async fn buffering(config: &Config) -> Result<Vec<(BodyPath, HeldHandler)>> {
    let seen: [Seen; 3] = Default::default();
    let mut backends = Vec::new();
    for log in &seen {
        backends.push(spawn_axum(recording_backend(log.clone())).await?);
    }
    let nginx = if lab_kit::nginx::find("nginx").is_none() {
        eprintln!(
            "server-timeouts: nginx not installed; the proxy part measures the direct path only"
        );
        None
    } else {
        let nginx = Nginx::start(2, |ports| {
            proxies((ports[0], backends[1].addr), (ports[1], backends[2].addr))
        })
        .await?;
        let (on, off) = (nginx.addrs()[0], nginx.addrs()[1]);
        Some((nginx, on, off))
    };
    let direct = measure(
        config,
        BodyPath::Direct,
        backends[0].addr,
        seen[0].clone(),
        "none",
    );
    let Some((nginx, on, off)) = nginx else {
        return Ok(vec![(BodyPath::Direct, direct.await?)]);
    };
    let (direct, buffered, streamed) = tokio::join!(
        direct,
        measure(
            config,
            BodyPath::BufferingOn,
            on,
            seen[1].clone(),
            &nginx.version
        ),
        measure(
            config,
            BodyPath::BufferingOff,
            off,
            seen[2].clone(),
            &nginx.version
        ),
    );
    // A path through nginx that failed says what nginx logged.
    let log = || format!("nginx's error log ends: {}", nginx.error_log_tail());
    let (buffered, streamed) = (buffered.with_context(log), streamed.with_context(log));
    drop(nginx);
    Ok(vec![
        (BodyPath::Direct, direct?),
        (BodyPath::BufferingOn, buffered?),
        (BodyPath::BufferingOff, streamed?),
    ])
}
