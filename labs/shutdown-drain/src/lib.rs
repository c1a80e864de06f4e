//! Graceful shutdown and drain: one deploy, four ways of handling SIGTERM,
//! and what each costs in failed requests.
//!
//! A real server process (this crate's own binary, `__server`) sits behind a
//! small readiness-polling balancer ([`balancer`]) next to a healthy peer.
//! Steady traffic flows through the balancer, a few long requests and
//! server-sent-event streams are pinned to the server, and then the lab does
//! what an orchestrator does: SIGTERM, a grace period, SIGKILL. Every request
//! is timed and classified; the server logs its own shutdown steps on the
//! same clock ([`events`]); afterwards the lab opens the server's SQLite file
//! and checks that every write it acknowledged is there.

pub mod balancer;
pub mod events;
pub mod health;
pub mod probe;
pub mod server;

/// The guarded child process, now in the kit; re-exported under its old
/// path for the tests and tools that name `lab_shutdown_drain::child`.
pub use lab_kit::child;

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use anyhow::{Context, Result, bail, ensure};
use lab_kit::{Meta, Mode, Output, child::ChildGuard, clock::monotonic_ms};
use serde::Serialize;
use tokio::{sync::watch, task::JoinSet};

use crate::{
    balancer::{
        BACKEND_HEADER, Balancer, BalancerConfig, ERROR_HEADER, PIN_HEADER, UPSTREAM_CLOSE_HEADER,
    },
    events::{first, read_events},
    server::{Variant, spawn_peer, written_ids},
};

/// The lab's slug: its folder, chapter, data file and charts.
pub const SLUG: &str = "shutdown-drain";

/// The production values the lab's timings are scaled down from (Kubernetes
/// defaults and common settings), in milliseconds.
pub mod production {
    /// Readiness probe `periodSeconds` (failureThreshold 1 in this lab).
    pub const READINESS_PERIOD_MS: u64 = 5_000;
    /// How long the server keeps serving after SIGTERM with readiness at 503
    /// (an in-app sleep; a preStop hook can wait instead, see deploy/pod.yaml).
    pub const DRAIN_WAIT_MS: u64 = 10_000;
    /// The server's own hard deadline after SIGTERM.
    pub const HARD_DEADLINE_MS: u64 = 25_000;
    /// SIGTERM to SIGKILL: `terminationGracePeriodSeconds` (the default, 30 s)
    /// minus the preStop hook's time, none in deploy/pod.yaml.
    pub const TERMINATION_GRACE_MS: u64 = 30_000;
    /// A long request in flight at SIGTERM (a report, an upload).
    pub const SLOW_MS: u64 = 20_000;

    // The one order the lab cannot run without: checked when the crate compiles.
    const _: () = assert!(
        HARD_DEADLINE_MS < TERMINATION_GRACE_MS,
        "the hard deadline must be below the grace period"
    );
}

/// What one run measures. Times in milliseconds, already scaled.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// Production time divided by lab time (25 means 30 s ran as 1.2 s).
    pub time_scale: f64,
    pub readiness_period_ms: u64,
    pub drain_wait_ms: u64,
    pub hard_deadline_ms: u64,
    pub termination_grace_ms: u64,
    pub slow_ms: u64,
    /// The interval between events on a stream (not scaled).
    pub stream_tick_ms: u64,
    /// One `/work` request through the balancer every this many ms.
    pub traffic_interval_ms: u64,
    /// Traffic before SIGTERM.
    pub warmup_ms: u64,
    /// Traffic after the server has exited.
    pub after_exit_ms: u64,
    /// Long requests pinned to the server and in flight at SIGTERM.
    pub slow_requests: usize,
    /// Polite streams (they leave when told) pinned to the server.
    pub streams: usize,
    /// A client gives up on a short request after this long.
    pub request_timeout_ms: u64,
    /// The lab binary, run as `__server` (not part of the meta record).
    #[serde(skip)]
    pub server_exe: PathBuf,
}

impl Config {
    pub fn for_mode(mode: Mode) -> Config {
        let time_scale: u64 = match mode {
            Mode::Quick => 25,
            Mode::Full => 5,
        };
        let scaled = |millis: u64| millis / time_scale;
        let readiness_period_ms = scaled(production::READINESS_PERIOD_MS);
        Config {
            time_scale: time_scale as f64,
            readiness_period_ms,
            drain_wait_ms: scaled(production::DRAIN_WAIT_MS),
            hard_deadline_ms: scaled(production::HARD_DEADLINE_MS),
            termination_grace_ms: scaled(production::TERMINATION_GRACE_MS),
            slow_ms: scaled(production::SLOW_MS),
            stream_tick_ms: 50,
            traffic_interval_ms: 20,
            // Traffic starts right after the poll that saw both backends
            // ready, and the warm-up is a whole number of poll periods: SIGTERM
            // lands just after a poll, so the balancer learns of it one full
            // period later. The worst case, on purpose, in every run.
            warmup_ms: 2 * readiness_period_ms,
            after_exit_ms: 2 * readiness_period_ms + 100,
            slow_requests: 3,
            streams: 2,
            request_timeout_ms: 3_000,
            server_exe: server_exe(),
        }
    }

    fn balancer(&self) -> BalancerConfig {
        BalancerConfig {
            poll_period: Duration::from_millis(self.readiness_period_ms),
            poll_timeout: Duration::from_millis(self.readiness_period_ms / 2),
            failure_threshold: 1,
            ready_path: "/readyz",
        }
    }
}

/// Where the lab's own binary is: `LAB_SHUTDOWN_DRAIN_EXE` if set; this
/// process if it is the lab; else `lab-shutdown-drain` beside the running
/// executable or one folder up (a test binary lives in `target/*/deps/`).
pub fn server_exe() -> PathBuf {
    if let Some(path) = std::env::var_os("LAB_SHUTDOWN_DRAIN_EXE") {
        return PathBuf::from(path);
    }
    let Ok(current) = std::env::current_exe() else {
        return PathBuf::from("lab-shutdown-drain");
    };
    let is_lab = current
        .file_name()
        .is_some_and(|name| name.to_string_lossy() == "lab-shutdown-drain");
    if is_lab {
        return current;
    }
    let beside = |dir: Option<&Path>| dir.map(|dir| dir.join("lab-shutdown-drain"));
    let parent = current.parent();
    [beside(parent), beside(parent.and_then(Path::parent))]
        .into_iter()
        .flatten()
        .find(|path| path.is_file())
        .unwrap_or_else(|| PathBuf::from("lab-shutdown-drain"))
}

/// The four deploys the lab compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// No SIGTERM handler.
    ExitAtOnce,
    /// `with_graceful_shutdown` alone.
    GracefulOnly,
    /// The full sequence.
    Full,
    /// The full sequence, and one stream client that ignores `goaway`.
    FullStuckStream,
}

impl Scenario {
    pub const ALL: [Scenario; 4] = [
        Scenario::ExitAtOnce,
        Scenario::GracefulOnly,
        Scenario::Full,
        Scenario::FullStuckStream,
    ];

    /// The series name in the data file.
    pub fn series(self) -> &'static str {
        match self {
            Scenario::ExitAtOnce => "exit-at-once",
            Scenario::GracefulOnly => "graceful-only",
            Scenario::Full => "full",
            Scenario::FullStuckStream => "full-stuck-stream",
        }
    }

    pub fn variant(self) -> Variant {
        match self {
            Scenario::ExitAtOnce => Variant::ExitAtOnce,
            Scenario::GracefulOnly => Variant::GracefulOnly,
            Scenario::Full | Scenario::FullStuckStream => Variant::Full,
        }
    }
}

/// How one request ended, as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The balancer answered 502: the backend refused the connection.
    Refused,
    /// Reset mid-flight: the balancer answered 502 because the backend
    /// closed or reset the connection before a whole response, or a response
    /// body (a stream) broke off.
    Reset,
    /// Another 502.
    BadGateway,
    /// 503, from the backend or from a balancer with nothing ready.
    Unavailable,
    /// Another status (500: the database was closed under the request).
    ServerError,
    /// The client gave up.
    Timeout,
    /// The request never reached the balancer.
    Error,
    /// A stream still open when the lab stopped watching.
    Open,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Refused => "refused",
            Outcome::Reset => "reset",
            Outcome::BadGateway => "502",
            Outcome::Unavailable => "503",
            Outcome::ServerError => "500",
            Outcome::Timeout => "timeout",
            Outcome::Error => "error",
            Outcome::Open => "open",
        }
    }

    /// The outcome's row on the timeline charts: 0 ok, 1 503, 2 refused,
    /// 3 reset, 4 another 502, 5 anything else. (The readiness lane is -1.)
    pub fn row(self) -> f64 {
        match self {
            Outcome::Ok | Outcome::Open => 0.0,
            Outcome::Unavailable => 1.0,
            Outcome::Refused => 2.0,
            Outcome::Reset => 3.0,
            Outcome::BadGateway => 4.0,
            Outcome::ServerError | Outcome::Timeout | Outcome::Error => 5.0,
        }
    }

    pub fn failed(self) -> bool {
        !matches!(self, Outcome::Ok | Outcome::Open)
    }
}

/// One request of a deploy, times in ms from the start of traffic.
#[derive(Debug, Clone, Serialize)]
pub struct RequestSample {
    pub kind: &'static str,
    pub start_ms: f64,
    pub end_ms: f64,
    /// The request's number in start order.
    pub lane: u64,
    /// Its height on the timeline chart: the outcome's row ([`Outcome::row`])
    /// give or take 0.2, by `lane`, so that requests on one row do not hide
    /// each other completely.
    pub row: f64,
    /// Where the chart ends the request's segment: `end_ms`, or a little
    /// later for a request so short that its segment would be thinner than
    /// a pixel (1/150 of the run). `end_ms` keeps the measured end.
    pub shown_end_ms: f64,
    /// Which backend answered: 0 the server being deployed, 1 the peer, -1
    /// the balancer itself or nobody.
    pub backend: i64,
    pub outcome: &'static str,
    /// The server's response said `Connection: close` (passed on by the balancer).
    pub upstream_close: bool,
    #[serde(skip)]
    pub acknowledged_id: Option<u64>,
    #[serde(skip)]
    pub result: Outcome,
}

/// What one deploy cost, and how the server ended.
#[derive(Debug, Clone, Serialize)]
pub struct DeploySummary {
    pub server_variant: &'static str,
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
    pub refused: u64,
    pub reset: u64,
    pub bad_gateway: u64,
    pub unavailable: u64,
    /// 500s, timeouts and errors.
    pub other_failures: u64,
    /// Requests served by the server being deployed (any outcome).
    pub to_server: u64,
    pub in_flight_at_sigterm: u64,
    pub in_flight_completed: u64,
    /// Long requests whose response told the balancer `Connection: close`.
    pub in_flight_with_connection_close: u64,
    pub streams: u64,
    /// Streams that ended without an error (left on goaway or ended by the server).
    pub streams_ended_cleanly: u64,
    /// `/work` requests the server being deployed answered 200 (each one a
    /// committed row, by the server's contract).
    pub acknowledged_writes: u64,
    /// Acknowledged writes found in the database file after the process ended.
    pub rows_present: u64,
    pub lost_writes: u64,
    /// "0", "1", "signal 15 (SIGTERM)", "signal 9 (SIGKILL)".
    pub exit: String,
    /// As a shell reports it (128 + signal).
    pub exit_code: i64,
    pub killed_by_orchestrator: bool,
    pub hit_deadline: bool,
    /// Times in ms from the start of traffic.
    pub sigterm_ms: f64,
    /// When the balancer took the server out.
    pub not_ready_ms: f64,
    /// When the server stopped accepting (its own log; for a process that
    /// never handles SIGTERM, the moment it died).
    pub stop_accepting_ms: f64,
    pub exit_ms: f64,
    pub time_to_exit_ms: f64,
    /// From SIGTERM to the balancer taking the server out.
    pub noticed_after_ms: f64,
    /// The server's own log: when it closed the database (-1: never did).
    pub db_closed_ms: f64,
    /// The server's own log: when its last response left the handler.
    pub last_response_ms: f64,
    /// Closed, with no request in flight and after the last response.
    pub db_closed_after_last_request: bool,
    pub child_pid: i64,
}

/// Everything one deploy produced.
#[derive(Debug, Clone)]
pub struct Deploy {
    pub scenario: Scenario,
    pub samples: Vec<RequestSample>,
    pub summary: DeploySummary,
    /// The readiness lane: from the balancer taking the server out to the end.
    pub not_ready_span: (f64, f64),
}

/// The server child's timing flags, the same for a deploy and for the probe run
/// of the lab's own server, so the two cannot drift apart.
fn server_timing_args(config: &Config) -> Vec<String> {
    vec![
        "--drain-wait-ms".into(),
        config.drain_wait_ms.to_string(),
        "--deadline-ms".into(),
        config.hard_deadline_ms.to_string(),
        "--slow-ms".into(),
        config.slow_ms.to_string(),
    ]
}

/// Runs `scenario` once: start the server, route traffic, deploy, check the database.
pub async fn run_deploy(scenario: Scenario, config: &Config) -> Result<Deploy> {
    let scratch = tempfile::tempdir().context("creating a temp dir")?;
    let db = scratch.path().join("server.db");
    let port_file = scratch.path().join("port");
    let events_file = scratch.path().join("events.jsonl");
    let mut args: Vec<String> = vec![
        "__server".into(),
        "--variant".into(),
        scenario.variant().name().into(),
        "--db".into(),
        db.display().to_string(),
        "--port-file".into(),
        port_file.display().to_string(),
        "--events".into(),
        events_file.display().to_string(),
        "--tick-ms".into(),
        config.stream_tick_ms.to_string(),
    ];
    args.extend(server_timing_args(config));
    let mut child = ChildGuard::spawn(&config.server_exe, &args, Stdio::null())
        .with_context(|| format!("starting the server {}", config.server_exe.display()))?;
    let port = wait_for_port_file(&port_file, &mut child, Duration::from_secs(10)).await?;
    let server_addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let (peer_addr, peer_task) = spawn_peer(
        &scratch.path().join("peer.db"),
        Duration::from_millis(config.stream_tick_ms),
    )
    .await?;
    let _abort_peer = AbortOnDrop(peer_task);
    let balancer = Balancer::start(&[server_addr, peer_addr], config.balancer()).await?;
    balancer
        .wait_all_ready(Duration::from_secs(5))
        .await
        .context("waiting for the balancer to see both backends ready")?;

    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("building the client")?;
    let t0 = monotonic_ms();
    let (stop, stopped) = watch::channel(false);
    let steady = tokio::spawn(steady_traffic(
        client.clone(),
        balancer.url("/work"),
        config.clone(),
        stopped.clone(),
    ));
    let mut pinned = JoinSet::new();
    let stream_url = balancer.url("/events");
    for _ in 0..config.streams {
        pinned.spawn(stream_client(
            client.clone(),
            stream_url.clone(),
            true,
            stopped.clone(),
        ));
    }
    if scenario == Scenario::FullStuckStream {
        pinned.spawn(stream_client(
            client.clone(),
            stream_url.clone(),
            false,
            stopped.clone(),
        ));
    }
    let lead = Duration::from_millis(50);
    tokio::time::sleep(Duration::from_millis(config.warmup_ms).saturating_sub(lead)).await;
    for _ in 0..config.slow_requests {
        let request = client
            .get(balancer.url("/slow"))
            .header(PIN_HEADER, "0")
            .timeout(Duration::from_millis(
                config.slow_ms + config.termination_grace_ms + 1_000,
            ));
        pinned.spawn(async move {
            let start = monotonic_ms();
            let answer = classify(request.send().await).await;
            request_sample("slow", start, answer, None)
        });
    }
    tokio::time::sleep(lead).await;

    // ANCHOR: orchestrator
    // What the orchestrator does: SIGTERM to the process, then wait out the
    // grace period, then SIGKILL.
    child.signal(libc::SIGTERM)?;
    let sigterm_at = monotonic_ms();
    let grace = Duration::from_millis(config.termination_grace_ms);
    let (ended, killed_by_orchestrator) = match child.wait_for(grace).await? {
        Some(ended) => (ended, false),
        None => (child.kill_group()?, true),
    };
    let exit_at = monotonic_ms();
    // ANCHOR_END: orchestrator

    tokio::time::sleep(Duration::from_millis(config.after_exit_ms)).await;
    let _ = stop.send(true);
    let mut samples = steady.await.context("the traffic task panicked")?;
    let collect_limit = Duration::from_millis(config.request_timeout_ms + 2_000);
    let collected = tokio::time::timeout(collect_limit, async {
        let mut done = Vec::new();
        while let Some(joined) = pinned.join_next().await {
            done.push(joined.context("a client task panicked")?);
        }
        anyhow::Ok(done)
    })
    .await
    .context("long requests and streams did not finish after the server exited")??;
    samples.extend(collected);
    let run_end = monotonic_ms();
    let transitions = balancer.transitions();
    drop(balancer);

    let events = read_events(&events_file)?;
    let written = written_ids(&db).context("reading the server's database after it exited")?;
    let pid = child.pid();
    drop(child);

    let not_ready_at = transitions
        .iter()
        .find(|change| change.backend == 0 && !change.ready && change.t_ms >= sigterm_at)
        .map_or(run_end, |change| change.t_ms);
    let event_at = |name: &str| first(&events, name).map(|event| event.t_ms);
    let relative = |at: f64| at - t0;
    let db_closed = event_at("db_closed");
    let last_response = event_at("last_response").and_then(|_| {
        first(&events, "last_response")
            .map(|event| event.value)
            .filter(|&value| value > 0.0)
    });
    let in_flight_at_close = first(&events, "db_closed").map(|event| event.value);

    // Numbers in start order; rows by outcome.
    samples.sort_by(|left, right| left.start_ms.total_cmp(&right.start_ms));
    for (index, sample) in samples.iter_mut().enumerate() {
        sample.start_ms = relative(sample.start_ms);
        sample.end_ms = relative(sample.end_ms);
        sample.lane = index as u64 + 1;
        sample.row = sample.result.row() + ((index % 5) as f64 - 2.0) * 0.1;
    }
    let visible = relative(run_end) / 150.0;
    for sample in &mut samples {
        sample.shown_end_ms = sample.end_ms.max(sample.start_ms + visible);
    }

    let count = |predicate: &dyn Fn(&RequestSample) -> bool| {
        samples.iter().filter(|sample| predicate(sample)).count() as u64
    };
    let acknowledged_from_server: Vec<u64> = samples
        .iter()
        .filter(|sample| sample.backend == 0)
        .filter_map(|sample| sample.acknowledged_id)
        .collect();
    let rows_present = acknowledged_from_server
        .iter()
        .filter(|id| written.contains(&(**id as i64)))
        .count() as u64;
    let summary = DeploySummary {
        server_variant: scenario.variant().name(),
        requests: samples.len() as u64,
        ok: count(&|sample| sample.result == Outcome::Ok),
        failed: count(&|sample| sample.result.failed()),
        refused: count(&|sample| sample.result == Outcome::Refused),
        reset: count(&|sample| sample.result == Outcome::Reset),
        bad_gateway: count(&|sample| sample.result == Outcome::BadGateway),
        unavailable: count(&|sample| sample.result == Outcome::Unavailable),
        other_failures: count(&|sample| {
            matches!(
                sample.result,
                Outcome::ServerError | Outcome::Timeout | Outcome::Error
            )
        }),
        to_server: count(&|sample| sample.backend == 0),
        in_flight_at_sigterm: count(&|sample| sample.kind == "slow"),
        in_flight_completed: count(&|sample| sample.kind == "slow" && sample.result == Outcome::Ok),
        in_flight_with_connection_close: count(&|sample| {
            sample.kind == "slow" && sample.result == Outcome::Ok && sample.upstream_close
        }),
        streams: count(&|sample| sample.kind == "stream"),
        streams_ended_cleanly: count(&|sample| {
            sample.kind == "stream" && sample.result == Outcome::Ok
        }),
        acknowledged_writes: acknowledged_from_server.len() as u64,
        rows_present,
        lost_writes: acknowledged_from_server.len() as u64 - rows_present,
        exit: ended.describe(),
        exit_code: i64::from(ended.shell_code()),
        killed_by_orchestrator,
        hit_deadline: event_at("deadline").is_some(),
        sigterm_ms: relative(sigterm_at),
        not_ready_ms: relative(not_ready_at),
        stop_accepting_ms: relative(event_at("stop_accepting").unwrap_or(exit_at)),
        exit_ms: relative(exit_at),
        time_to_exit_ms: exit_at - sigterm_at,
        noticed_after_ms: not_ready_at - sigterm_at,
        db_closed_ms: db_closed.map_or(-1.0, relative),
        last_response_ms: last_response.map_or(-1.0, relative),
        db_closed_after_last_request: match (db_closed, last_response, in_flight_at_close) {
            (Some(closed), Some(last), Some(in_flight)) => closed >= last && in_flight == 0.0,
            _ => false,
        },
        child_pid: i64::from(pid),
    };
    Ok(Deploy {
        scenario,
        samples,
        summary,
        not_ready_span: (relative(not_ready_at), relative(run_end)),
    })
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Waits for the server to write its port, or to die trying.
async fn wait_for_port_file(path: &Path, child: &mut ChildGuard, limit: Duration) -> Result<u16> {
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

fn request_sample(
    kind: &'static str,
    start: f64,
    answer: Answer,
    acknowledged_id: Option<u64>,
) -> RequestSample {
    let result = answer.outcome;
    RequestSample {
        kind,
        start_ms: start,
        end_ms: monotonic_ms(),
        lane: 0,
        row: 0.0,
        shown_end_ms: 0.0,
        backend: answer.backend,
        outcome: result.name(),
        upstream_close: answer.upstream_close,
        acknowledged_id: acknowledged_id.filter(|_| result == Outcome::Ok),
        result,
    }
}

/// How a request through the balancer ended.
#[derive(Debug, Clone, Copy)]
struct Answer {
    outcome: Outcome,
    /// Which backend answered (-1: the balancer itself, or nobody).
    backend: i64,
    /// The backend's response carried `Connection: close`.
    upstream_close: bool,
}

impl Answer {
    fn without_response(outcome: Outcome) -> Answer {
        Answer {
            outcome,
            backend: -1,
            upstream_close: false,
        }
    }
}

// ANCHOR: classify
/// How a request through the balancer ended, and which backend answered.
async fn classify(sent: reqwest::Result<reqwest::Response>) -> Answer {
    let response = match sent {
        Ok(response) => response,
        Err(error) if error.is_timeout() => return Answer::without_response(Outcome::Timeout),
        Err(_) => return Answer::without_response(Outcome::Error),
    };
    let backend = response
        .headers()
        .get(BACKEND_HEADER)
        .and_then(|value| value.to_str().ok()?.parse().ok())
        .unwrap_or(-1);
    let upstream_close = response.headers().contains_key(UPSTREAM_CLOSE_HEADER);
    let balancer_said = response
        .headers()
        .get(ERROR_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let outcome = match (response.status().as_u16(), balancer_said.as_deref()) {
        (200, _) => match response.bytes().await {
            Ok(_) => Outcome::Ok,
            // The head arrived, the body broke off: reset mid-flight.
            Err(_) => Outcome::Reset,
        },
        (502, Some("refused")) => Outcome::Refused,
        (502, Some("reset")) => Outcome::Reset,
        (502, _) => Outcome::BadGateway,
        (503, _) => Outcome::Unavailable,
        _ => Outcome::ServerError,
    };
    Answer {
        outcome,
        backend,
        upstream_close,
    }
}
// ANCHOR_END: classify

/// One `/work` request every `traffic_interval_ms` until told to stop, each
/// with its own id (the row it should write).
async fn steady_traffic(
    client: reqwest::Client,
    url: String,
    config: Config,
    mut stopped: watch::Receiver<bool>,
) -> Vec<RequestSample> {
    let mut requests = JoinSet::new();
    let mut ticker = tokio::time::interval(Duration::from_millis(config.traffic_interval_ms));
    let timeout = Duration::from_millis(config.request_timeout_ms);
    let mut next_id = 1u64;
    // Bounded in count as well as time: the stop signal ends it, and so does
    // this many requests (far more than any mode sends).
    while next_id < 100_000 {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stopped.changed() => break,
        }
        let id = next_id;
        next_id += 1;
        let request = client.get(format!("{url}?id={id}")).timeout(timeout).send();
        requests.spawn(async move {
            let start = monotonic_ms();
            let answer = classify(request.await).await;
            request_sample("work", start, answer, Some(id))
        });
    }
    let mut samples = Vec::new();
    while let Some(joined) = requests.join_next().await {
        if let Ok(sample) = joined {
            samples.push(sample);
        }
    }
    samples
}

// ANCHOR: stream_client
/// A server-sent-events client pinned to the server. A polite one leaves when
/// it reads `event: goaway`; a stubborn one keeps reading until the stream
/// breaks.
async fn stream_client(
    client: reqwest::Client,
    url: String,
    polite: bool,
    mut stopped: watch::Receiver<bool>,
) -> RequestSample {
    let start = monotonic_ms();
    let sent = client.get(&url).header(PIN_HEADER, "0").send().await;
    let mut response = match sent {
        Ok(response) if response.status() == reqwest::StatusCode::OK => response,
        other => {
            return request_sample("stream", start, classify(other).await, None);
        }
    };
    let backend = response
        .headers()
        .get(BACKEND_HEADER)
        .and_then(|value| value.to_str().ok()?.parse().ok())
        .unwrap_or(-1);
    let result = loop {
        tokio::select! {
            chunk = response.chunk() => match chunk {
                Ok(Some(bytes)) => {
                    if polite && bytes.windows(13).any(|window| window == b"event: goaway") {
                        // Leave now; a real client reconnects, through the
                        // balancer, to a backend that is still ready.
                        break Outcome::Ok;
                    }
                }
                Ok(None) => break Outcome::Ok,
                Err(_) => break Outcome::Reset,
            },
            _ = stopped.changed() => break Outcome::Open,
        }
    };
    let answer = Answer {
        outcome: result,
        backend,
        upstream_close: false,
    };
    request_sample("stream", start, answer, None)
}
// ANCHOR_END: stream_client

/// The whole lab: every scenario as timeline samples and a summary, then the
/// liveness simulation of the health-check chapter.
pub async fn run(mode: Mode, config: &Config, out: &mut Output) -> Result<()> {
    out.meta(Meta::describe(SLUG, mode, config.time_scale, config)?)?;
    ensure!(
        config.hard_deadline_ms < config.termination_grace_ms,
        "the hard deadline must be below the orchestrator's grace period"
    );
    for scenario in Scenario::ALL {
        eprintln!("shutdown-drain: deploy with {}", scenario.series());
        let deploy = run_deploy(scenario, config)
            .await
            .with_context(|| format!("scenario {}", scenario.series()))?;
        write_deploy(&deploy, out)?;
        eprintln!(
            "shutdown-drain: {}: {} of {} requests failed, exit {} after {:.0} ms",
            scenario.series(),
            deploy.summary.failed,
            deploy.summary.requests,
            deploy.summary.exit,
            deploy.summary.time_to_exit_ms
        );
    }
    for variant in [Variant::ExitAtOnce, Variant::Full] {
        eprintln!("shutdown-drain: probe on the {} server", variant.name());
        let report = probe_own_server(variant, config)
            .await
            .with_context(|| format!("probing the {} server", variant.name()))?;
        // The record keeps the numbers; the sentences stay on stderr.
        let mut fields = serde_json::to_value(&report).context("encoding the probe report")?;
        if let Some(map) = fields.as_object_mut() {
            map.remove("verdict");
            map.remove("command");
        }
        eprintln!("{}", report.verdict);
        out.summary_of(&format!("probe/{}", variant.name()), &fields)?;
    }
    health::write_simulation(&health::SimulationConfig::default(), out)?;
    Ok(())
}

/// Runs the probe on the lab's own server, as a user would run it on theirs.
pub async fn probe_own_server(variant: Variant, config: &Config) -> Result<probe::ProbeReport> {
    let scratch = tempfile::tempdir().context("creating a temp dir")?;
    // A port that was free a moment ago (the probe checks again).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .context("finding a free port")?
        .port();
    let command = vec![
        config.server_exe.display().to_string(),
        "__server".into(),
        "--variant".into(),
        variant.name().into(),
        "--port".into(),
        port.to_string(),
        "--db".into(),
        scratch.path().join("probe.db").display().to_string(),
    ];
    let command: Vec<String> = command
        .into_iter()
        .chain(server_timing_args(config))
        .collect();
    let mut args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--slow-path",
        "/slow",
        "--warmup-ms",
        &config.warmup_ms.to_string(),
        "--grace-ms",
        &config.termination_grace_ms.to_string(),
        "--",
    ]
    .map(String::from)
    .to_vec();
    args.extend(command);
    probe::probe(&probe::parse_args(&args)?).await
}

/// Writes one deploy's records: a timeline sample per request, the
/// readiness lane, and the summary.
///
/// Timeline series are `<scenario>/<kind>` (work, slow, stream) and
/// `<scenario>/not-ready`: every deploy has all four by construction, so a
/// chart can list them whatever the run's outcomes were. The outcome is the
/// sample's row.
pub fn write_deploy(deploy: &Deploy, out: &mut Output) -> Result<()> {
    let name = deploy.scenario.series();
    for sample in &deploy.samples {
        out.sample(&format!("{name}/{}", sample.kind), sample)?;
    }
    #[derive(Serialize)]
    struct Lane {
        start_ms: f64,
        end_ms: f64,
        shown_end_ms: f64,
        row: f64,
    }
    out.sample(
        &format!("{name}/not-ready"),
        &Lane {
            start_ms: deploy.not_ready_span.0,
            end_ms: deploy.not_ready_span.1,
            shown_end_ms: deploy.not_ready_span.1,
            row: -1.0,
        },
    )?;
    out.summary_of(name, &deploy.summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seconds a `preStop` hook of `manifest` sleeps: the exec form
    /// (`command: ["sleep", "N"]`) or Kubernetes' built-in sleep action
    /// (`sleep: { seconds: N }`); 0 without a hook. Comment lines do not count.
    fn pre_stop_sleep_seconds(manifest: &str) -> u64 {
        let mut lines = manifest
            .lines()
            .map(|line| line.split('#').next().unwrap_or_default())
            .filter(|line| !line.trim().is_empty())
            .skip_while(|line| line.trim() != "preStop:");
        let Some(hook) = lines.next() else {
            return 0;
        };
        let hook_indent = hook.len() - hook.trim_start().len();
        let body: String = lines
            .take_while(|line| line.len() - line.trim_start().len() > hook_indent)
            .collect();
        let digits = |text: &str| -> u64 {
            let number: String = text
                .trim_start_matches(|c: char| !c.is_ascii_digit())
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            number
                .parse()
                .unwrap_or_else(|_| panic!("no number of seconds in the preStop hook: {body}"))
        };
        if let Some((_, after)) = body.split_once("\"sleep\"") {
            digits(after)
        } else if let Some((_, after)) = body.split_once("seconds:") {
            digits(after)
        } else {
            panic!("a preStop hook the test cannot read (not a sleep): {body}")
        }
    }

    #[test]
    fn reads_the_pre_stop_sleep_of_a_manifest() {
        let exec = "lifecycle:\n  preStop:\n    exec: { command: [\"sleep\", \"10\"] }\n";
        assert_eq!(pre_stop_sleep_seconds(exec), 10);
        let builtin = "  preStop:\n    sleep:\n      seconds: 7\n";
        assert_eq!(pre_stop_sleep_seconds(builtin), 7);
        let commented = "      # preStop:\n      #   exec: { command: [\"sleep\", \"10\"] }\n";
        assert_eq!(pre_stop_sleep_seconds(commented), 0);
    }

    /// The first `key: N` of `manifest` outside comments.
    fn manifest_number(manifest: &str, key: &str) -> u64 {
        manifest
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                (name.trim() == key).then(|| value.split('#').next()?.trim().parse().ok())?
            })
            .unwrap_or_else(|| panic!("{key} is not in the manifest"))
    }

    /// Kubernetes starts `terminationGracePeriodSeconds` when it deletes the
    /// pod, runs the preStop hook inside it, and sends SIGTERM only when the
    /// hook returns: the app's time from SIGTERM to SIGKILL is the grace
    /// period minus the hook. That is the time the lab plays, and the hard
    /// deadline (counted from SIGTERM) must end inside it.
    fn assert_shutdown_fits(manifest: &str, which: &str) {
        let grace_ms = manifest_number(manifest, "terminationGracePeriodSeconds") * 1000;
        let pre_stop_ms = pre_stop_sleep_seconds(manifest) * 1000;
        assert!(
            pre_stop_ms + production::HARD_DEADLINE_MS < grace_ms,
            "{which}: a {pre_stop_ms} ms preStop hook plus the app's {} ms hard deadline does \
             not fit in a {grace_ms} ms grace period: SIGKILL would come first",
            production::HARD_DEADLINE_MS
        );
        assert_eq!(
            grace_ms - pre_stop_ms,
            production::TERMINATION_GRACE_MS,
            "{which}: SIGTERM to SIGKILL (grace period minus preStop) is what the lab plays"
        );
    }

    /// The manifest the chapter shows and the lab's production values agree,
    /// and so does the preStop alternative its comment spells out.
    #[test]
    fn the_manifest_matches_the_production_values() {
        let manifest = include_str!("../deploy/pod.yaml");
        assert_shutdown_fits(manifest, "the manifest");
        assert_eq!(
            manifest_number(manifest, "periodSeconds") * 1000,
            production::READINESS_PERIOD_MS,
            "the first periodSeconds is the readiness probe's"
        );
        // The alternative is written as comment lines that start with `#   `.
        let alternative: String = manifest
            .lines()
            .filter_map(|line| line.trim_start().strip_prefix("#   "))
            .map(|line| format!("{line}\n"))
            .collect();
        assert_ne!(
            pre_stop_sleep_seconds(&alternative),
            0,
            "the commented alternative has a preStop hook: {alternative}"
        );
        assert_shutdown_fits(&alternative, "the commented preStop alternative");
    }

    #[test]
    fn quick_mode_scales_every_production_time_by_one_factor() {
        let config = Config::for_mode(Mode::Quick);
        let scale = config.time_scale as u64;
        assert_eq!(
            config.termination_grace_ms * scale,
            production::TERMINATION_GRACE_MS
        );
        assert_eq!(
            config.hard_deadline_ms * scale,
            production::HARD_DEADLINE_MS
        );
        assert_eq!(config.drain_wait_ms * scale, production::DRAIN_WAIT_MS);
        assert_eq!(
            config.readiness_period_ms * scale,
            production::READINESS_PERIOD_MS
        );
    }
}
