//! The idle-close race at deploy time. When the server stops accepting, hyper
//! closes its idle keep-alive connections at once; a balancer that still
//! routes here may already have written a request onto one of them. On
//! loopback the close arrives first and the balancer's pool drops the
//! connection in time; across a network it does not. So this part puts the
//! keep-alive lab's link-delay shim ([`lab_keepalive_race::link_delay`])
//! between the balancer and the server and counts the 502s a pooled
//! connection carried into the close, for each way of telling the balancer
//! before closing: nothing, `Connection: close` on every response, a
//! readiness 503 and a wait, or both.

use std::{net::SocketAddr, process::Stdio, time::Duration};

use anyhow::{Context, Result};
use lab_keepalive_race::link_delay::LinkDelay;
use lab_kit::{Series, child::ChildGuard, net::AbortOnDrop};
use serde::Serialize;
use tokio::sync::watch;

use crate::{
    Config,
    balancer::ReadinessBalancer,
    clients::{Outcome, RequestSample, steady_traffic},
    deploy::{ServerFiles, orchestrate, wait_for_port_file},
    events::{first, read_events},
    server::spawn_peer,
};

lab_kit::series! {
    /// What the server tells the balancer between SIGTERM and closing its
    /// idle connections (it keeps serving for the drain wait in every case).
    pub enum BeforeClose in "idle-close" {
        /// Nothing: readiness stays 200, responses stay keep-alive.
        KeepAlive => "keep-alive",
        /// Every response says `Connection: close`; readiness stays 200.
        ConnectionClose => "connection-close",
        /// Readiness 503 at SIGTERM; responses stay keep-alive.
        ReadinessWait => "readiness-wait",
        /// Both: the full sequence.
        ReadinessAndClose => "readiness-and-close",
    }
}

impl BeforeClose {
    /// (readiness 503 at SIGTERM, `Connection: close` while draining)
    pub fn signals(self) -> (bool, bool) {
        match self {
            BeforeClose::KeepAlive => (false, false),
            BeforeClose::ConnectionClose => (false, true),
            BeforeClose::ReadinessWait => (true, false),
            BeforeClose::ReadinessAndClose => (true, true),
        }
    }
}

/// One deploy through the link, counted.
#[derive(Debug, Clone, Serialize)]
pub struct IdleCloseSummary {
    pub readiness_503: bool,
    pub connection_close: bool,
    pub link_delay_ms: f64,
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
    /// 502s whose request went out on a pooled connection the server had
    /// closed (or closed while the request crossed the link): the race.
    pub pooled_502: u64,
    /// 502s on a connection opened for the request: nothing listened any
    /// more behind the link (the shim accepts, then finds the port closed).
    pub new_connection_502: u64,
    /// 503s and anything else.
    pub other_failures: u64,
    /// `/work` requests the server answered (any status).
    pub to_server: u64,
    /// The server's own log: SIGTERM to closing its idle connections.
    pub close_after_ms: f64,
    /// SIGTERM to the balancer taking the server out (-1: it never did).
    pub noticed_after_ms: f64,
    /// When the first and the last request that became a pooled 502 left
    /// the client, from the server's close (0 when there was none).
    pub pooled_502_first_sent_ms: f64,
    pub pooled_502_last_sent_ms: f64,
    pub exit_code: i64,
}

/// Runs one deploy of `case` through the link delay.
pub async fn run_idle_close(case: BeforeClose, config: &Config) -> Result<IdleCloseSummary> {
    let scratch = tempfile::tempdir().context("creating a temp dir")?;
    let files = ServerFiles::in_dir(scratch.path());
    let (readiness_503, connection_close) = case.signals();
    let yes_no = |flag: bool| if flag { "yes" } else { "no" };
    let mut args: Vec<String> = [
        "__server",
        "--style",
        "full",
        "--drain-readiness",
        yes_no(readiness_503),
        "--drain-connection-close",
        yes_no(connection_close),
    ]
    .map(String::from)
    .to_vec();
    for (flag, path) in [
        ("--db", &files.db),
        ("--port-file", &files.port),
        ("--events", &files.events),
    ] {
        args.extend([flag.to_string(), path.display().to_string()]);
    }
    args.extend(config.server_timing_args());
    let mut child = ChildGuard::spawn(&config.server_exe, &args, Stdio::null())
        .with_context(|| format!("starting the server {}", config.server_exe.display()))?;
    let port = wait_for_port_file(&files.port, &mut child, Duration::from_secs(10)).await?;
    let link_delay = Duration::from_millis(config.race_link_delay_ms);
    // ANCHOR: through_the_link
    // The balancer reaches the server, its pooled connections and its
    // readiness polls alike, through the link; the peer directly.
    let server = SocketAddr::from(([127, 0, 0, 1], port));
    let link = LinkDelay::spawn(server, link_delay).await?;
    // ANCHOR_END: through_the_link
    let tick = Duration::from_millis(config.stream_tick_ms);
    let (peer_addr, _peer) = spawn_peer(&files.peer_db, tick).await?;
    let mut polls = config.balancer();
    // A poll crosses the link twice: give it the whole period, not half.
    polls.poll_timeout = polls.poll_period;
    let balancer = ReadinessBalancer::start(&[link.addr, peer_addr], polls).await?;
    balancer
        .wait_all_ready(Duration::from_secs(5))
        .await
        .context("waiting for the balancer to see both backends ready")?;

    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("building the client")?;
    let (stop, stopped) = watch::channel(false);
    let traffic = AbortOnDrop::spawn(steady_traffic(
        client,
        balancer.url("/work"),
        Duration::from_millis(config.race_traffic_interval_ms),
        Duration::from_millis(config.request_timeout_ms),
        stopped,
    ));
    tokio::time::sleep(Duration::from_millis(config.warmup_ms)).await;
    let grace = Duration::from_millis(config.termination_grace_ms);
    let ending = orchestrate(&mut child, grace).await?;
    // Traffic goes on until the balancer has taken the server out (bounded),
    // and for two link delays more, so every request it sent there is in.
    let give_up = tokio::time::Instant::now() + 3 * polls.poll_period;
    while balancer.is_ready(0) && tokio::time::Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(2 * link_delay + Duration::from_millis(50)).await;
    let _ = stop.send(true);
    let limit = Duration::from_millis(config.request_timeout_ms + 2_000);
    let samples = traffic
        .join_within(limit)
        .await
        .context("the steady traffic did not finish")?;
    let noticed_at = balancer
        .transitions()
        .iter()
        .find(|change| change.backend == 0 && !change.ready && change.t_ms >= ending.sigterm_at)
        .map(|change| change.t_ms);
    drop(balancer);
    drop(child);
    let events = read_events(&files.events)?;
    let close_at = first(&events, "stop_accepting")
        .map(|event| event.t_ms)
        .context("the server logged no stop_accepting")?;
    Ok(summarize(
        case,
        config,
        &samples,
        Moments {
            sigterm_at: ending.sigterm_at,
            close_at,
            noticed_at,
        },
        ending.ended.shell_code(),
    ))
}

/// Three moments of one deploy, CLOCK_MONOTONIC ms.
struct Moments {
    sigterm_at: f64,
    close_at: f64,
    noticed_at: Option<f64>,
}

fn summarize(
    case: BeforeClose,
    config: &Config,
    samples: &[RequestSample],
    moments: Moments,
    exit_code: i32,
) -> IdleCloseSummary {
    let count = |keep: &dyn Fn(&RequestSample) -> bool| {
        samples.iter().filter(|sample| keep(sample)).count() as u64
    };
    let is_502 = |sample: &RequestSample| {
        matches!(
            sample.result,
            Outcome::Refused | Outcome::Reset | Outcome::BadGateway
        )
    };
    let pooled_sent: Vec<f64> = samples
        .iter()
        .filter(|sample| is_502(sample) && sample.on_pooled_connection)
        .map(|sample| sample.start_ms - moments.close_at)
        .collect();
    let failed = count(&|sample| sample.result.failed());
    let all_502 = count(&is_502);
    let (readiness_503, connection_close) = case.signals();
    IdleCloseSummary {
        readiness_503,
        connection_close,
        link_delay_ms: config.race_link_delay_ms as f64,
        requests: samples.len() as u64,
        ok: count(&|sample| sample.result == Outcome::Ok),
        failed,
        pooled_502: pooled_sent.len() as u64,
        new_connection_502: all_502 - pooled_sent.len() as u64,
        other_failures: failed - all_502,
        to_server: count(&|sample| sample.backend == 0),
        close_after_ms: moments.close_at - moments.sigterm_at,
        noticed_after_ms: moments
            .noticed_at
            .map_or(-1.0, |at| at - moments.sigterm_at),
        pooled_502_first_sent_ms: pooled_sent.iter().copied().reduce(f64::min).unwrap_or(0.0),
        pooled_502_last_sent_ms: pooled_sent.iter().copied().reduce(f64::max).unwrap_or(0.0),
        exit_code: i64::from(exit_code),
    }
}

/// Every case at once (they wait on timers), in [`BeforeClose::ALL`]'s order.
pub async fn idle_close_race(config: &Config) -> Result<Vec<(BeforeClose, IdleCloseSummary)>> {
    let config = config.clone();
    lab_kit::concurrently::run_all(
        BeforeClose::ALL,
        |case| case.series(),
        move |case| {
            let config = config.clone();
            async move { run_idle_close(case, &config).await }
        },
    )
    .await
}
