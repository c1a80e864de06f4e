//! Connection reuse: the same requests, sent by five client setups, and how
//! many TCP connections the server had to accept for each.
//!
//! The server counts accepted connections itself ([`lab_kit::listener`]), and
//! after each setup the lab reads the kernel's socket table for client-side
//! sockets left in TIME_WAIT, so every number here is observed, not inferred.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, Result, ensure};
use axum::{Router, routing::get};
use lab_kit::{
    Lab, Mode, Output, Series,
    procnet::{TcpState, count_at, count_toward, resets_sent},
    server::spawn_axum,
    stats::{Latencies, median},
};
use serde::{Deserialize, Serialize};

pub mod ports;
pub mod tls;

/// What one run measures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// Requests sent by each setup.
    pub requests: usize,
    /// Requests in flight at once.
    pub in_flight: usize,
    /// Size of each response body in bytes; large enough that a client which
    /// drops the body unread has not already received all of it.
    pub body_bytes: usize,
    /// How many times each setup runs; the summary holds the medians.
    pub repeats: usize,
    /// The in-flight values of the shared-pool concurrency sweep.
    pub sweep: Vec<usize>,
    /// Requests sent one at a time by each TLS setup.
    pub tls_requests: usize,
    /// Ports in each socket's own range in the `EADDRNOTAVAIL` part.
    pub port_window: u32,
}

impl Lab for Config {
    const MANIFEST: &str = include_str!("../Cargo.toml");

    fn for_mode(mode: Mode) -> Config {
        Config {
            // The Node article's experiment: 500 requests, 50 at a time.
            requests: 500,
            in_flight: 50,
            body_bytes: 64 * 1024,
            repeats: mode.pick(1, 5),
            sweep: mode.pick(
                vec![1, 2, 5, 10, 25, 50, 100, 200],
                vec![1, 2, 3, 5, 8, 10, 15, 25, 35, 50, 75, 100, 150, 200],
            ),
            tls_requests: mode.pick(200, 1000),
            // A handful: the error comes after a few requests, not 28,000.
            port_window: 8,
        }
    }

    async fn run(&self, out: &mut Output) -> Result<()> {
        run(self, out).await
    }
}

lab_kit::series! {
    /// The client setups the lab compares.
    pub enum Setup {
        /// A new `reqwest::Client` for every request: a new pool every time.
        ClientPerRequest => "client-per-request",
        /// One `Client`, shared: what reqwest's docs ask for.
        SharedPool => "shared-pool",
        /// One shared `Client` that keeps no idle connection.
        NoIdlePool => "no-idle-pool",
        /// One shared `Client`, but the caller drops each body unread.
        UnreadBody => "unread-body",
        /// One shared `Client` speaking HTTP/2 over cleartext (prior knowledge).
        Http2 => "http2",
    }
}

// ANCHOR: clients
/// The client each setup uses. Every client skips proxy settings from the
/// environment: the lab talks to 127.0.0.1 only.
fn build_client(setup: Setup) -> Result<reqwest::Client> {
    let builder = reqwest::Client::builder().no_proxy();
    let builder = match setup {
        // One client, one pool. reqwest keeps idle connections for 90 s by
        // default and puts no cap on how many it opens to one host.
        Setup::SharedPool | Setup::UnreadBody | Setup::ClientPerRequest => builder,
        // A pool that returns nothing to idle: every request needs a new
        // connection unless one is free at that very moment (none ever is).
        Setup::NoIdlePool => builder.pool_max_idle_per_host(0),
        // Plain http:// is HTTP/1.1 unless told otherwise; prior knowledge
        // sends the HTTP/2 preface straight away, and every request becomes
        // a stream on one connection.
        Setup::Http2 => builder.http2_prior_knowledge(),
    };
    builder.build().context("building a reqwest client")
}

/// One request, as each setup sends it.
async fn send(setup: Setup, shared: &reqwest::Client, url: &str) -> Result<()> {
    match setup {
        Setup::ClientPerRequest => {
            // The anti-pattern: a fresh client, so a fresh pool, per call.
            let client = build_client(setup)?;
            let response = client.get(url).send().await?.error_for_status()?;
            response.bytes().await?;
        }
        Setup::UnreadBody => {
            // Status checked, body never read: the connection cannot go back
            // to the pool with bytes still unread on it, so it is closed.
            let response = shared.get(url).send().await?.error_for_status()?;
            drop(response);
        }
        Setup::SharedPool | Setup::NoIdlePool | Setup::Http2 => {
            let response = shared.get(url).send().await?.error_for_status()?;
            response.bytes().await?;
        }
    }
    Ok(())
}
// ANCHOR_END: clients

/// What one setup's run observed.
#[derive(Debug, Clone, Serialize)]
pub struct SetupSummary {
    pub requests: usize,
    pub in_flight: usize,
    /// TCP connections the server accepted.
    pub connections: u64,
    /// The most connections the server had open at once.
    pub peak_open: u64,
    pub wall_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Client-side sockets toward the server in TIME_WAIT after the run: the
    /// side that closes first keeps the TIME_WAIT.
    pub time_wait: usize,
    /// Server-side sockets in TIME_WAIT after the run.
    pub server_time_wait: usize,
    /// TCP resets the machine sent during the run (kernel counter, machine-wide):
    /// a connection closed with unread bytes in its receive buffer ends with RST.
    pub resets_sent: u64,
    /// How many times the setup ran; the numbers above are medians.
    pub repeats: usize,
}

/// One measurement of one setup: a fresh server, `requests` requests with
/// `in_flight` at a time, then the counts.
pub async fn measure(
    setup: Setup,
    requests: usize,
    in_flight: usize,
    body_bytes: usize,
) -> Result<SetupSummary> {
    ensure!(
        requests > 0 && in_flight > 0,
        "requests and in_flight must be positive"
    );
    let body = Arc::new(vec![b'x'; body_bytes]);
    let app = Router::new().route(
        "/data",
        get(move || {
            let body = Arc::clone(&body);
            async move { body.as_ref().clone() }
        }),
    );
    let server = spawn_axum(app).await?;
    let url = server.url("/data");
    let port = server.addr.port();
    // A port number can be reused while old sockets toward it still linger in
    // TIME_WAIT; count only what this run adds.
    let time_wait_before = count_toward(port, TcpState::TimeWait)?;
    let server_time_wait_before = count_at(port, TcpState::TimeWait)?;
    let resets_before = resets_sent()?;

    let shared = build_client(setup)?;
    let next_request = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    // ANCHOR: in_flight
    // `in_flight` workers pull request numbers until all are taken, so exactly
    // that many requests are outstanding at any moment (until the tail).
    for _ in 0..in_flight.min(requests) {
        let (shared, url, next_request) = (shared.clone(), url.clone(), Arc::clone(&next_request));
        workers.spawn(async move {
            let mut latencies = Latencies::default();
            while next_request.fetch_add(1, Ordering::SeqCst) < requests {
                let sent = Instant::now();
                send(setup, &shared, &url).await?;
                latencies.record(sent.elapsed());
            }
            anyhow::Ok(latencies)
        });
    }
    // ANCHOR_END: in_flight
    let mut latencies = Latencies::default();
    while let Some(joined) = workers.join_next().await {
        latencies.extend(joined.context("a client task panicked")??);
    }
    let wall = started.elapsed();
    // Dropping the last handle to the shared client closes its idle
    // connections from the client side, as a process exit would.
    drop(shared);
    let connections = server.stats.accepted();
    let peak_open = server.stats.peak_open();
    // Closing is asynchronous: wait until the server has seen every
    // connection close (bounded), then read the socket table.
    let deadline = Instant::now() + Duration::from_secs(2);
    while server.stats.open() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let time_wait = count_toward(port, TcpState::TimeWait)?.saturating_sub(time_wait_before);
    let server_time_wait =
        count_at(port, TcpState::TimeWait)?.saturating_sub(server_time_wait_before);
    let resets = resets_sent()?.saturating_sub(resets_before);
    server.stop(Duration::from_secs(1)).await?;
    let latency = latencies.summary();
    ensure!(
        latency.count == requests,
        "{} of {requests} requests completed",
        latency.count
    );
    Ok(SetupSummary {
        requests,
        in_flight,
        connections,
        peak_open,
        wall_ms: wall.as_secs_f64() * 1000.0,
        p50_ms: latency.p50_ms,
        p99_ms: latency.p99_ms,
        time_wait,
        server_time_wait,
        resets_sent: resets,
        repeats: 1,
    })
}

/// One point of the concurrency sweep.
#[derive(Debug, Clone, Serialize)]
pub struct InFlightPoint {
    pub in_flight: usize,
    pub connections: u64,
    pub peak_open: u64,
    pub wall_ms: f64,
}

/// The whole lab: every setup, the sweep, TLS and ports, as records on `out`.
async fn run(config: &Config, out: &mut Output) -> Result<()> {
    for setup in Setup::ALL {
        eprintln!(
            "conn-reuse: {} ({} x {} requests)",
            setup.series(),
            config.repeats,
            config.requests
        );
        let mut runs = Vec::with_capacity(config.repeats);
        for _ in 0..config.repeats {
            let summary = measure(setup, config.requests, config.in_flight, config.body_bytes)
                .await
                .with_context(|| format!("setup {}", setup.series()))?;
            out.write_sample(&setup.series(), &summary)?;
            runs.push(summary);
        }
        out.write_summary(&setup.series(), &median_of(&runs))?;
    }
    for &in_flight in &config.sweep {
        eprintln!("conn-reuse: sweep, {in_flight} in flight");
        let measured = measure(
            Setup::SharedPool,
            config.requests.max(in_flight * 4),
            in_flight,
            config.body_bytes,
        )
        .await
        .with_context(|| format!("sweep at {in_flight} in flight"))?;
        out.write_sample(
            "sweep-shared-pool",
            &InFlightPoint {
                in_flight,
                connections: measured.connections,
                peak_open: measured.peak_open,
                wall_ms: measured.wall_ms,
            },
        )?;
    }
    let time_wait = ports::time_wait(config.requests, config.in_flight).await?;
    out.write_summary(ports::TIME_WAIT_SERIES, &time_wait)?;
    // The port window's part spends about a second asleep, waiting for the
    // kernel to free a port, so it waits while the TLS part works: the TLS
    // part's CPU times are its own threads' clocks, which a sleeping task
    // does not touch.
    let (tls, refused) = tokio::join!(
        tls::measure_all(config.tls_requests),
        ports::refused(config.port_window)
    );
    for (setup, summary) in tls? {
        out.write_summary(&setup.series(), &summary)?;
    }
    if let Some(refused) = refused? {
        out.write_summary(ports::REFUSED_SERIES, &refused)?;
    }
    Ok(())
}

/// Medians over repeated runs of one setup (the counts are medians too).
fn median_of(runs: &[SetupSummary]) -> SetupSummary {
    let pick =
        |field: fn(&SetupSummary) -> f64| median(&runs.iter().map(field).collect::<Vec<_>>());
    SetupSummary {
        requests: runs[0].requests,
        in_flight: runs[0].in_flight,
        connections: pick(|run| run.connections as f64) as u64,
        peak_open: pick(|run| run.peak_open as f64) as u64,
        wall_ms: pick(|run| run.wall_ms),
        p50_ms: pick(|run| run.p50_ms),
        p99_ms: pick(|run| run.p99_ms),
        time_wait: pick(|run| run.time_wait as f64) as usize,
        server_time_wait: pick(|run| run.server_time_wait as f64) as usize,
        resets_sent: pick(|run| run.resets_sent as f64) as u64,
        repeats: runs.len(),
    }
}

/// The lab binary's `main`; `src/main.rs` only calls it. It lives in the
/// library because the binary crate is where generic code is compiled at
/// opt-level 3 a second time: with `main` in the binary, each lab's binary
/// took 8 to 24 s to compile; with it here, under half a second
/// (ARCHITECTURE.md, "Timings and build profiles").
pub fn main() -> std::process::ExitCode {
    lab_kit::cli::run_lab::<Config>()
}
