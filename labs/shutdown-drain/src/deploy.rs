//! One deploy, step by step: start the server child, its healthy peer and the
//! readiness balancer; send traffic; play orchestrator (SIGTERM, a grace
//! period, SIGKILL); collect every request and the server's own evidence.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use anyhow::{Context, Result, bail};
use lab_kit::{child::ChildGuard, clock::monotonic_ms, net::AbortOnDrop};
use tokio::{sync::watch, task::JoinSet};

use crate::{
    Config,
    app::written_ids,
    balancer::ReadinessBalancer,
    clients::{RequestSample, slow_request, steady_traffic, stream_client},
    events::read_events,
    server::spawn_peer,
    timeline::{self, Deploy, DeployCase, ProcessEnding, ServerEvidence},
};

/// Runs `case` once: start the backends, route traffic, deploy, check the database.
pub async fn run_deploy(case: DeployCase, config: &Config) -> Result<Deploy> {
    let scratch = tempfile::tempdir().context("creating a temp dir")?;
    let files = ServerFiles::in_dir(scratch.path());
    let mut backends = Backends::start(case, config, &files).await?;
    let mut traffic = Traffic::start(case, config, &backends.balancer)?;
    traffic.send_slow_requests(config, &backends.balancer).await;
    let grace = Duration::from_millis(config.termination_grace_ms);
    let ending = orchestrate(&mut backends.child, grace).await?;
    tokio::time::sleep(Duration::from_millis(config.after_exit_ms)).await;
    let t0 = traffic.t0;
    let samples = traffic.finish(config).await?;
    let run_end = monotonic_ms();
    let transitions = backends.balancer.transitions();
    let child_pid = backends.child.pid();
    drop(backends);
    let evidence = ServerEvidence {
        events: read_events(&files.events)?,
        written: written_ids(&files.db).context("reading the server's database after it exited")?,
        child_pid,
    };
    Ok(timeline::assemble(
        case,
        samples,
        &ending,
        &evidence,
        &transitions,
        (t0, run_end),
    ))
}

/// Where the server child keeps its database, port and event log.
pub(crate) struct ServerFiles {
    pub(crate) db: PathBuf,
    pub(crate) port: PathBuf,
    pub(crate) events: PathBuf,
    pub(crate) peer_db: PathBuf,
}

impl ServerFiles {
    pub(crate) fn in_dir(dir: &Path) -> ServerFiles {
        ServerFiles {
            db: dir.join("server.db"),
            port: dir.join("port"),
            events: dir.join("events.jsonl"),
            peer_db: dir.join("peer.db"),
        }
    }
}

/// The server child, its in-process peer, and the balancer in front of both.
/// Dropping it stops the balancer and the peer and kills the child's group.
struct Backends {
    child: ChildGuard,
    balancer: ReadinessBalancer,
    _peer: AbortOnDrop,
}

impl Backends {
    async fn start(case: DeployCase, config: &Config, files: &ServerFiles) -> Result<Backends> {
        let mut args: Vec<String> = vec![
            "__server".into(),
            "--style".into(),
            case.style().name().into(),
            "--db".into(),
            files.db.display().to_string(),
            "--port-file".into(),
            files.port.display().to_string(),
            "--events".into(),
            files.events.display().to_string(),
            "--tick-ms".into(),
            config.stream_tick_ms.to_string(),
        ];
        args.extend(config.server_timing_args());
        let mut child = ChildGuard::spawn(&config.server_exe, &args, Stdio::null())
            .with_context(|| format!("starting the server {}", config.server_exe.display()))?;
        let port = wait_for_port_file(&files.port, &mut child, Duration::from_secs(10)).await?;
        let server_addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let (peer_addr, peer) =
            spawn_peer(&files.peer_db, Duration::from_millis(config.stream_tick_ms)).await?;
        let balancer =
            ReadinessBalancer::start(&[server_addr, peer_addr], config.balancer()).await?;
        balancer
            .wait_all_ready(Duration::from_secs(5))
            .await
            .context("waiting for the balancer to see both backends ready")?;
        Ok(Backends {
            child,
            balancer,
            _peer: peer,
        })
    }
}

/// Waits for the server to write its port, or to die trying.
pub(crate) async fn wait_for_port_file(
    path: &Path,
    child: &mut ChildGuard,
    limit: Duration,
) -> Result<u16> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text
                .trim()
                .parse()
                .with_context(|| format!("the port file says {text:?}"));
        }
        if let Some(ended) = child.try_ended()? {
            bail!(
                "the server exited ({}) before it listened",
                ended.describe()
            );
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("the server did not listen within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The clients of one deploy, running.
struct Traffic {
    /// When traffic started (CLOCK_MONOTONIC ms): zero on the timeline.
    t0: f64,
    client: reqwest::Client,
    stop: watch::Sender<bool>,
    steady: AbortOnDrop<Vec<RequestSample>>,
    pinned: JoinSet<RequestSample>,
}

impl Traffic {
    /// Steady traffic and the streams, from now on.
    fn start(case: DeployCase, config: &Config, balancer: &ReadinessBalancer) -> Result<Traffic> {
        // `no_proxy`: the lab talks to 127.0.0.1 only, whatever the environment says.
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .context("building the client")?;
        let t0 = monotonic_ms();
        let (stop, stopped) = watch::channel(false);
        let steady = AbortOnDrop::spawn(steady_traffic(
            client.clone(),
            balancer.url("/work"),
            Duration::from_millis(config.traffic_interval_ms),
            Duration::from_millis(config.request_timeout_ms),
            stopped.clone(),
        ));
        let mut pinned = JoinSet::new();
        let stubborn = usize::from(case == DeployCase::FullStuckStream);
        for index in 0..config.streams + stubborn {
            let polite = index < config.streams;
            let url = balancer.url("/events");
            pinned.spawn(stream_client(client.clone(), url, polite, stopped.clone()));
        }
        Ok(Traffic {
            t0,
            client,
            stop,
            steady,
            pinned,
        })
    }

    /// After the warm-up, the long requests that will be in flight at SIGTERM.
    async fn send_slow_requests(&mut self, config: &Config, balancer: &ReadinessBalancer) {
        let lead = Duration::from_millis(50);
        tokio::time::sleep(Duration::from_millis(config.warmup_ms).saturating_sub(lead)).await;
        let timeout = Duration::from_millis(config.slow_ms + config.termination_grace_ms + 1_000);
        for _ in 0..config.slow_requests {
            let url = balancer.url("/slow");
            self.pinned
                .spawn(slow_request(self.client.clone(), url, timeout));
        }
        tokio::time::sleep(lead).await;
    }

    /// Stops the clients and collects every request (bounded: a client that
    /// hangs fails the deploy rather than the lab's budget).
    async fn finish(mut self, config: &Config) -> Result<Vec<RequestSample>> {
        let _ = self.stop.send(true);
        let limit = Duration::from_millis(config.request_timeout_ms + 2_000);
        let mut samples = self
            .steady
            .join_within(limit)
            .await
            .context("the steady traffic did not finish")?;
        let collected = tokio::time::timeout(limit, async {
            let mut done = Vec::new();
            while let Some(joined) = self.pinned.join_next().await {
                done.push(joined.context("a client task panicked")?);
            }
            anyhow::Ok(done)
        })
        .await
        .context("long requests and streams did not finish after the server exited")??;
        samples.extend(collected);
        Ok(samples)
    }
}

// ANCHOR: orchestrator
/// What the orchestrator does: SIGTERM to the process, then wait out the
/// grace period, then SIGKILL.
pub(crate) async fn orchestrate(child: &mut ChildGuard, grace: Duration) -> Result<ProcessEnding> {
    child.signal(libc::SIGTERM)?;
    let sigterm_at = monotonic_ms();
    let (ended, killed_by_orchestrator) = match child.wait_for(grace).await? {
        Some(ended) => (ended, false),
        None => (child.kill_group()?, true),
    };
    Ok(ProcessEnding {
        sigterm_at,
        exit_at: monotonic_ms(),
        ended,
        killed_by_orchestrator,
    })
}
// ANCHOR_END: orchestrator
