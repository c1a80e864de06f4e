//! A small HTTP/1.1 load balancer with a keep-alive pool to one upstream (put
//! a [`LinkDelay`](crate::link_delay::LinkDelay) between it and the backend).
//!
//! The balancer behaves the way AWS ALB, nginx and Envoy do in the one respect
//! this lab is about: it keeps idle upstream connections in a pool for its own
//! idle timeout, ignores any `Keep-Alive: timeout=` hint, drops pooled
//! connections it has already seen closed, never retries, and answers 502 when
//! the upstream closes or resets before a response.
//!
//! Nothing here depends on the rest of the lab except the `wire` module, so
//! both could move to the kit unchanged.
//!
//! Simplifications: one upstream; request bodies framed by `Content-Length`
//! only; one request at a time per connection (no pipelining).

use std::{
    net::SocketAddr,
    os::fd::AsRawFd,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use lab_kit::net::{AbortOnDrop, bind_loopback, spawn_accept_loop};
use serde::Serialize;
use tokio::net::TcpStream;

use crate::{
    access_log::AccessLine,
    wire::{Request, Response, Wire},
};

/// The access log keeps at most this many lines; past it, lines are counted
/// in `lines_not_kept` and dropped, so a long run's memory stays bounded.
const ACCESS_LOG_LINES: usize = 20_000;

/// How the balancer behaves.
#[derive(Debug, Clone, Copy)]
pub struct PoolingBalancerConfig {
    /// Where requests go (the backend, or a [`LinkDelay`](crate::link_delay::LinkDelay) in front of it).
    pub upstream: SocketAddr,
    /// Pooled upstream connections idle for this long are closed, never
    /// reused (AWS ALB: 60 s by default).
    pub idle_timeout: Duration,
    /// How long to wait for an upstream response before answering 504.
    pub response_timeout: Duration,
    /// How long to wait for an upstream TCP connection.
    pub connect_timeout: Duration,
}

/// What the balancer did, counted as it happened.
#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    upstream_connects: AtomicU64,
    reused: AtomicU64,
    dropped_seen_closed: AtomicU64,
    dropped_idle: AtomicU64,
    bad_gateway: AtomicU64,
    bad_gateway_on_reused: AtomicU64,
    gateway_timeout: AtomicU64,
}

/// A snapshot of the balancer's counters.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PoolingBalancerStats {
    pub requests: u64,
    /// New TCP connections to the upstream.
    pub upstream_connects: u64,
    /// Requests sent on a pooled (reused) connection.
    pub reused: u64,
    /// Pooled connections dropped because the upstream had closed them.
    pub dropped_seen_closed: u64,
    /// Pooled connections closed by the balancer's own idle timeout.
    pub dropped_idle: u64,
    pub bad_gateway: u64,
    /// 502s whose request went out on a reused connection.
    pub bad_gateway_on_reused: u64,
    pub gateway_timeout: u64,
}

struct Pooled {
    wire: Wire,
    idle_since: Instant,
}

struct Shared {
    config: PoolingBalancerConfig,
    /// Idle upstream connections, most recently used last. A std Mutex: it is
    /// held for a push or a pop, never across an await.
    pool: Mutex<Vec<Pooled>>,
    counters: Counters,
    /// One line a request, in ALB's field order (`access_log`).
    access_log: Mutex<AccessLog>,
}

#[derive(Default)]
struct AccessLog {
    lines: Vec<AccessLine>,
    lines_not_kept: u64,
}

/// A running balancer. Dropping it stops it and closes its connections.
pub struct PoolingBalancer {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    _task: AbortOnDrop,
}

impl PoolingBalancer {
    /// Listens on 127.0.0.1:0 and forwards every request to `config.upstream`.
    pub async fn spawn(config: PoolingBalancerConfig) -> Result<PoolingBalancer> {
        let listener = bind_loopback().await?;
        let addr = listener
            .local_addr()
            .context("reading the balancer's address")?;
        let shared = Arc::new(Shared {
            config,
            pool: Mutex::new(Vec::new()),
            counters: Counters::default(),
            access_log: Mutex::new(AccessLog::default()),
        });
        let for_connections = Arc::clone(&shared);
        let task = spawn_accept_loop(listener, move |stream, peer| {
            serve_downstream(Arc::clone(&for_connections), stream, peer)
        });
        Ok(PoolingBalancer {
            addr,
            shared,
            _task: task,
        })
    }

    pub fn stats(&self) -> PoolingBalancerStats {
        let counters = &self.shared.counters;
        let load = |counter: &AtomicU64| counter.load(Ordering::SeqCst);
        PoolingBalancerStats {
            requests: load(&counters.requests),
            upstream_connects: load(&counters.upstream_connects),
            reused: load(&counters.reused),
            dropped_seen_closed: load(&counters.dropped_seen_closed),
            dropped_idle: load(&counters.dropped_idle),
            bad_gateway: load(&counters.bad_gateway),
            bad_gateway_on_reused: load(&counters.bad_gateway_on_reused),
            gateway_timeout: load(&counters.gateway_timeout),
        }
    }

    /// The access log so far (at most its first 20,000 lines) and how many
    /// lines past those were counted but not kept.
    pub fn access_log(&self) -> (Vec<AccessLine>, u64) {
        let log = self
            .shared
            .access_log
            .lock()
            .expect("access log lock poisoned");
        (log.lines.clone(), log.lines_not_kept)
    }
}

/// One client connection: requests in, responses out, until the client
/// closes or asks to.
async fn serve_downstream(shared: Arc<Shared>, stream: TcpStream, client: SocketAddr) {
    let mut downstream = Wire::new(stream);
    loop {
        let request = match downstream.read_request().await {
            Ok(Some(request)) => request,
            Ok(None) | Err(_) => return,
        };
        let received = Instant::now();
        shared.counters.requests.fetch_add(1, Ordering::SeqCst);
        let mut exchange = Exchange::default();
        let outcome = forward(&shared, &request, &mut exchange).await;
        let target_status_code = outcome.as_ref().ok().map(|response| response.status);
        let response = match outcome {
            Ok(response) => encode_response(&response, request.close),
            Err(failure) => {
                let (status, reason) = match failure {
                    Failure::Timeout => {
                        shared
                            .counters
                            .gateway_timeout
                            .fetch_add(1, Ordering::SeqCst);
                        (504, "upstream timed out".to_string())
                    }
                    Failure::Upstream { error, reused } => {
                        shared.counters.bad_gateway.fetch_add(1, Ordering::SeqCst);
                        if reused {
                            shared
                                .counters
                                .bad_gateway_on_reused
                                .fetch_add(1, Ordering::SeqCst);
                        }
                        (502, format!("{error:#}"))
                    }
                };
                encode_error(status, &reason, request.close)
            }
        };
        // Logged as the response starts back (ALB's response_processing_time
        // ends there too), so a client that has its answer finds its line.
        log_request(
            &shared,
            &request,
            &response,
            AccessTimes {
                client,
                received,
                exchange,
                target_status_code,
            },
        );
        if downstream.send(&response).await.is_err() || request.close {
            return;
        }
    }
}

/// What `forward` saw of the upstream side, for the access log.
#[derive(Debug, Default)]
struct Exchange {
    target: Option<SocketAddr>,
    sent_upstream: Option<Instant>,
    response_read: Option<Instant>,
}

struct AccessTimes {
    client: SocketAddr,
    received: Instant,
    exchange: Exchange,
    target_status_code: Option<u16>,
}

/// Appends the request's line to the access log (or counts it, past the cap).
fn log_request(shared: &Shared, request: &Request, response: &[u8], times: AccessTimes) {
    let now = Instant::now();
    let AccessTimes {
        client,
        received,
        exchange,
        target_status_code,
    } = times;
    let elb_status_code = status_of(response);
    let host = crate::wire::header(&request.headers, "host").unwrap_or("-");
    // The bytes of the request as it came: request line, headers, blank
    // line, body.
    let received_bytes = format!("{} {} HTTP/1.1\r\n", request.method, request.target).len()
        + request
            .headers
            .iter()
            .map(|(name, value)| name.len() + value.len() + 4)
            .sum::<usize>()
        + 2
        + request.body.len();
    let line = AccessLine {
        time: std::time::SystemTime::now(),
        client,
        target: exchange.target,
        request_processing: exchange.sent_upstream.map(|sent| sent - received),
        target_processing: exchange
            .sent_upstream
            .zip(exchange.response_read)
            .map(|(sent, read)| read - sent),
        response_processing: exchange.response_read.map(|read| now - read),
        elb_status_code,
        target_status_code,
        received_bytes,
        sent_bytes: response.len(),
        request: format!(
            "{} http://{host}{} HTTP/1.1",
            request.method, request.target
        ),
    };
    let mut log = shared.access_log.lock().expect("access log lock poisoned");
    if log.lines.len() < ACCESS_LOG_LINES {
        log.lines.push(line);
    } else {
        log.lines_not_kept += 1;
    }
}

/// The status code of an encoded response (`HTTP/1.1 502 ...`).
fn status_of(response: &[u8]) -> u16 {
    response
        .get(9..12)
        .and_then(|code| std::str::from_utf8(code).ok())
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

enum Failure {
    Timeout,
    Upstream { error: anyhow::Error, reused: bool },
}

// ANCHOR: checkout
/// Takes the most recently used idle connection that is still worth using,
/// closing the ones that are not: too long idle by the balancer's own clock,
/// or already closed by the upstream (a FIN that has arrived shows up as a
/// readable socket with nothing to read). A FIN still on the wire cannot be
/// seen; that is the race.
fn checkout(shared: &Shared) -> Option<Pooled> {
    let mut pool = shared.pool.lock().expect("pool lock poisoned");
    let idle_timeout = shared.config.idle_timeout;
    let before = pool.len();
    pool.retain(|pooled| pooled.idle_since.elapsed() < idle_timeout);
    let expired = before - pool.len();
    shared
        .counters
        .dropped_idle
        .fetch_add(expired as u64, Ordering::SeqCst);
    while let Some(pooled) = pool.pop() {
        if pooled.wire.buffered() == 0 && !peer_has_closed(pooled.wire.stream.tcp()) {
            return Some(pooled);
        }
        shared
            .counters
            .dropped_seen_closed
            .fetch_add(1, Ordering::SeqCst);
    }
    None
}
// ANCHOR_END: checkout

/// True when the peer's FIN (or RST, or unexpected bytes) has arrived: a
/// non-blocking peek returns 0 (EOF), an error, or data, rather than
/// "would block". This is the check nginx and Envoy make on idle upstream
/// connections.
fn peer_has_closed(stream: &TcpStream) -> bool {
    let mut byte = 0u8;
    // SAFETY: `recv` writes at most one byte into `byte`, which outlives the
    // call; the descriptor belongs to `stream`, which is borrowed for it.
    let peeked = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if peeked < 0 {
        let error = std::io::Error::last_os_error();
        return error.kind() != std::io::ErrorKind::WouldBlock;
    }
    true
}

/// Sends one request upstream on a pooled or a new connection and reads the
/// response. No retry: a request that may have reached the backend is not
/// resent, which is what ALB does and why its 502 reaches the client.
async fn forward(
    shared: &Shared,
    request: &Request,
    seen: &mut Exchange,
) -> Result<Response, Failure> {
    let config = &shared.config;
    seen.target = Some(config.upstream);
    let (mut wire, reused) = match checkout(shared) {
        Some(pooled) => {
            shared.counters.reused.fetch_add(1, Ordering::SeqCst);
            (pooled.wire, true)
        }
        None => {
            let wire = Wire::connect(config.upstream, config.connect_timeout)
                .await
                .map_err(|error| Failure::Upstream {
                    error: anyhow::Error::new(error).context("connecting upstream"),
                    reused: false,
                })?;
            shared
                .counters
                .upstream_connects
                .fetch_add(1, Ordering::SeqCst);
            (wire, false)
        }
    };
    let exchange = async {
        wire.send(&encode_request(request)).await?;
        seen.sent_upstream = Some(Instant::now());
        let response = wire.read_response(&request.method).await;
        if response.is_ok() {
            seen.response_read = Some(Instant::now());
        }
        response
    };
    let response = match tokio::time::timeout(config.response_timeout, exchange).await {
        Err(_) => return Err(Failure::Timeout),
        Ok(Err(error)) => {
            let error = anyhow::Error::new(error).context(if reused {
                "upstream failed on a reused connection"
            } else {
                "upstream failed on a new connection"
            });
            return Err(Failure::Upstream { error, reused });
        }
        Ok(Ok(response)) => response,
    };
    if !response.close {
        let mut pool = shared.pool.lock().expect("pool lock poisoned");
        pool.push(Pooled {
            wire,
            idle_since: Instant::now(),
        });
    }
    Ok(response)
}

/// Hop-by-hop headers: they describe one connection and are not forwarded.
fn hop_by_hop(name: &str) -> bool {
    [
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
    ]
    .iter()
    .any(|hop| name.eq_ignore_ascii_case(hop))
}

fn encode_request(request: &Request) -> Vec<u8> {
    let mut head = format!("{} {} HTTP/1.1\r\n", request.method, request.target);
    for (name, value) in request.headers.iter().filter(|(name, _)| !hop_by_hop(name)) {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !request.body.is_empty() || request.method == "POST" || request.method == "PUT" {
        head.push_str(&format!("Content-Length: {}\r\n", request.body.len()));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&request.body);
    bytes
}

fn encode_response(response: &Response, close: bool) -> Vec<u8> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\n",
        response.status,
        reason(response.status)
    );
    for (name, value) in response
        .headers
        .iter()
        .filter(|(name, _)| !hop_by_hop(name))
    {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n", response.body.len()));
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&response.body);
    bytes
}

fn encode_error(status: u16, detail: &str, close: bool) -> Vec<u8> {
    let body = format!("{status} {}: {detail}\n", reason(status));
    let connection = if close { "Connection: close\r\n" } else { "" };
    format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n{connection}\r\n{body}",
        reason(status),
        body.len()
    )
    .into_bytes()
}

fn reason(status: u16) -> &'static str {
    http::StatusCode::from_u16(status)
        .ok()
        .and_then(|code| code.canonical_reason())
        .unwrap_or("Unknown")
}
