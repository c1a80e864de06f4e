//! Ports: what a client per request does to the machine's ephemeral ports.
//!
//! Part one counts the `TIME_WAIT` sockets a client per request leaves toward
//! the server and reads how long each still has to live (the timer column of
//! `/proc/net/tcp`), then sets the rate of new connections against the
//! ephemeral range: the ceiling it implies per destination. Part two makes
//! the kernel refuse for real, without changing any machine setting: each
//! socket narrows its own port range to a handful of ports
//! (`IP_LOCAL_PORT_RANGE`, Linux 6.3 and later), so `connect` fails with
//! `EADDRNOTAVAIL` after a few requests; then it waits to see when the kernel
//! lets a port in `TIME_WAIT` be used again.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use axum::{Router, routing::get};
use lab_kit::{
    ports::{connect_in_window, ephemeral_range, window},
    procnet::{TcpState, count_toward, tcp_sockets},
    server::{RunningServer, spawn_axum},
};
use serde::Serialize;
use tokio::net::TcpStream;

use crate::tls::{get as get_once, handshake};

/// How long part two waits for the kernel to hand out a `TIME_WAIT` port again.
const REUSE_BOUND: Duration = Duration::from_secs(3);
/// The series names of the two parts.
pub const TIME_WAIT_SERIES: &str = "ports/time-wait";
pub const REFUSED_SERIES: &str = "ports/eaddrnotavail";

/// Part one: the `TIME_WAIT` a client per request leaves, against the range.
#[derive(Debug, Clone, Serialize)]
pub struct TimeWaitSummary {
    pub requests: usize,
    pub in_flight: usize,
    pub connections: u64,
    pub wall_ms: f64,
    /// New connections a second this client opened.
    pub connections_per_s: f64,
    /// Client-side sockets toward the server in `TIME_WAIT` after the run.
    pub time_wait: usize,
    /// The longest time any of them still had to live, read from its timer.
    pub time_wait_left_s: f64,
    /// `net.ipv4.ip_local_port_range`, and how many ports it holds.
    pub port_range_low: u32,
    pub port_range_high: u32,
    pub ports_in_range: u32,
    /// New connections a second toward one address that the range sustains
    /// when each closed connection holds its port for the `TIME_WAIT`.
    pub ceiling_per_s: f64,
    /// How long this client's rate takes to hold every port of the range.
    pub seconds_to_exhaust: f64,
}

/// Part two: a client per request in a range of a few ports.
#[derive(Debug, Clone, Serialize)]
pub struct RefusedSummary {
    pub ports_in_window: u32,
    /// Requests that got a port before `connect` failed.
    pub requests_ok: usize,
    /// The error `connect` returned, as the program sees it, and its number.
    pub error: String,
    pub os_error: i32,
    /// Client sockets toward the server in `TIME_WAIT` when it failed.
    pub time_wait_held: usize,
    /// `net.ipv4.tcp_tw_reuse`: 2 lets loopback connections reuse a port in
    /// `TIME_WAIT` once it is old enough.
    pub tcp_tw_reuse: u32,
    /// Whether a connect in the same window succeeded again within the bound,
    /// and after how long (the bound itself when it did not).
    pub reused: bool,
    pub reused_after_ms: f64,
}

fn sysctl(path: &str) -> Result<String> {
    std::fs::read_to_string(path)
        .map(|text| text.trim().to_string())
        .with_context(|| format!("reading {path}"))
}

/// Seconds left on the timers of client sockets in `TIME_WAIT` toward
/// `server_port`.
fn time_wait_timers(server_port: u16) -> Result<Vec<f64>> {
    // SAFETY: sysconf has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(tcp_sockets()?
        .iter()
        .filter(|row| row.remote_port == server_port && row.state == TcpState::TimeWait as u8)
        .map(|row| row.timer_ticks as f64 / ticks_per_s)
        .collect())
}

async fn small_server() -> Result<RunningServer> {
    spawn_axum(Router::new().route("/", get(|| async { "ok" }))).await
}

/// One request on a fresh connection, closed by the client afterwards.
async fn request_on(stream: TcpStream) -> Result<()> {
    let (mut sender, task) = handshake(stream).await?;
    get_once(&mut sender).await?;
    drop(sender);
    task.await.context("the connection task")
}

/// Part one: `requests` requests, a new connection each, `in_flight` at once.
pub async fn time_wait(requests: usize, in_flight: usize) -> Result<TimeWaitSummary> {
    eprintln!("conn-reuse: ports, {requests} requests with a connection each");
    let server = small_server().await?;
    let (addr, port) = (server.addr, server.addr.port());
    let before = count_toward(port, TcpState::TimeWait)?;
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..in_flight.clamp(1, requests.max(1)) {
        let next = Arc::clone(&next);
        workers.spawn(async move {
            while next.fetch_add(1, Ordering::SeqCst) < requests {
                let stream = TcpStream::connect(addr).await.context("connecting")?;
                request_on(stream).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(joined) = workers.join_next().await {
        joined.context("a client task panicked")??;
    }
    let wall = started.elapsed();
    // Wait (bounded) until the server has seen every close, so every client
    // socket has reached TIME_WAIT, then read the table.
    let deadline = Instant::now() + Duration::from_secs(2);
    while server.stats.open() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let time_wait = count_toward(port, TcpState::TimeWait)?.saturating_sub(before);
    let timers = time_wait_timers(port)?;
    let connections = server.stats.accepted();
    server.stop(Duration::from_secs(1)).await?;
    let time_wait_left_s = timers.iter().copied().fold(0.0, f64::max);
    anyhow::ensure!(
        time_wait_left_s > 0.0,
        "no TIME_WAIT timer toward port {port}"
    );
    let (low, high) = ephemeral_range()?;
    let ports = high - low + 1;
    let connections_per_s = connections as f64 / wall.as_secs_f64();
    Ok(TimeWaitSummary {
        requests,
        in_flight,
        connections,
        wall_ms: wall.as_secs_f64() * 1000.0,
        connections_per_s,
        time_wait,
        time_wait_left_s,
        port_range_low: low,
        port_range_high: high,
        ports_in_range: ports,
        ceiling_per_s: ports as f64 / time_wait_left_s,
        seconds_to_exhaust: ports as f64 / connections_per_s,
    })
}

/// Part two. `None` when this kernel has no per-socket port range (one line
/// on stderr says so; the chapter says what the part shows).
pub async fn refused(window_size: u32) -> Result<Option<RefusedSummary>> {
    eprintln!("conn-reuse: ports, a window of {window_size} ports per socket");
    let server = small_server().await?;
    let addr = server.addr;
    let window = window(window_size)?;
    let mut requests_ok = 0;
    let error = loop {
        match connect_in_window(addr, window).await {
            Ok(stream) => {
                request_on(stream).await?;
                requests_ok += 1;
            }
            Err(error) if error.raw_os_error() == Some(libc::ENOPROTOOPT) => {
                eprintln!(
                    "conn-reuse: skipped the port window: this kernel has no IP_LOCAL_PORT_RANGE (Linux 6.3+)"
                );
                server.stop(Duration::from_secs(1)).await?;
                return Ok(None);
            }
            Err(error) if error.raw_os_error() == Some(libc::EADDRNOTAVAIL) => break error,
            Err(error) => return Err(error).context("connecting in the port window"),
        }
        anyhow::ensure!(
            requests_ok <= 2 * window_size as usize + 2,
            "{requests_ok} requests in a window of {window_size} ports and no EADDRNOTAVAIL"
        );
    };
    let refused_at = Instant::now();
    let time_wait_held = count_toward(addr.port(), TcpState::TimeWait)?;
    // The same window again, every 25 ms, until the kernel hands out a port
    // in TIME_WAIT (loopback, `tcp_tw_reuse` = 2) or the bound passes.
    let mut reused = false;
    while refused_at.elapsed() < REUSE_BOUND {
        tokio::time::sleep(Duration::from_millis(25)).await;
        match connect_in_window(addr, window).await {
            Ok(stream) => {
                request_on(stream).await?;
                reused = true;
                break;
            }
            Err(again) if again.raw_os_error() == Some(libc::EADDRNOTAVAIL) => continue,
            Err(again) => return Err(again).context("connecting in the port window again"),
        }
    }
    let reused_after_ms = refused_at.elapsed().as_secs_f64() * 1000.0;
    server.stop(Duration::from_secs(1)).await?;
    Ok(Some(RefusedSummary {
        ports_in_window: window_size,
        requests_ok,
        os_error: error.raw_os_error().unwrap_or_default(),
        error: error.to_string(),
        time_wait_held,
        tcp_tw_reuse: sysctl("/proc/sys/net/ipv4/tcp_tw_reuse")?
            .parse()
            .unwrap_or_default(),
        reused,
        reused_after_ms,
    }))
}
