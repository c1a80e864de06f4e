//! Runs the checks against one server: a first request to make sure there
//! is an HTTP server to probe, then the watching checks (and the handler
//! deadline, one request waited on) side by side with the load checks one
//! after another (so that one burst does not spoil another's timing), then,
//! with a command, the shutdown. When the lab probes several servers at
//! once, their load checks take turns ([`Turn`]).

pub mod deadline;
pub mod load;
pub mod shutdown;
pub mod slow_read;
mod turn;
pub mod watch;

pub use turn::Turn;

pub use crate::patient::Patient;
use crate::patient::start;

use std::{net::SocketAddr, time::Duration};

use anyhow::{Context, Result, bail};
use lab_keepalive_race::{
    probe::resolve_target,
    wire::{Wire, WireError, get_request},
};
use lab_kit::{child::ChildGuard, conn::Connector};
use tokio::{sync::mpsc, task::JoinSet};

use crate::{
    finding::{Check, Finding},
    h2,
    options::{Options, Target},
    tls,
};

/// What a run found, and what it spoke: "plain TCP", or the TLS session
/// ("TLS 1.3, ALPN http/1.1, certificate ...").
#[derive(Debug)]
pub struct Examined {
    pub findings: Vec<Finding>,
    pub transport: String,
}

/// How long a check may take at most, beyond which it is reported as hung.
fn bound(check: Check, options: &Options) -> Duration {
    let slack = Duration::from_secs(10);
    match check {
        Check::Shutdown | Check::H2Goaway => options.grace + Duration::from_secs(20),
        Check::Overload | Check::RetryAfter => {
            Duration::from_secs(5) + options.caller_timeout * 3 + slack
        }
        // Half a second of quiet, the burst (each heavy request bounded), 200 ms.
        Check::BlockedRuntime => load::HEAVY_LIMIT + Duration::from_secs(1) + slack,
        _ => options.window + slack,
    }
}

/// The first request: is there an HTTP server, and does it answer? Every
/// failure here means the doctor cannot probe (exit 2). Returns the status
/// and what the connection spoke ([`Examined::transport`]).
pub async fn first_answer(patient: &Patient) -> Result<(u16, String)> {
    let (addr, host, path) = (patient.addr, &patient.host, &patient.options.paths.fast);
    let connected = Wire::connect_with(&patient.connector, addr, Duration::from_secs(5)).await;
    let mut wire = match (connected, &patient.options.tls) {
        (Ok(wire), _) => wire,
        (Err(error), Some(_)) => bail!("{}", tls::connect_failure(&error, addr, host)),
        (Err(error), None) if error.kind() == std::io::ErrorKind::ConnectionRefused => {
            bail!("nothing listens on {addr} (connection refused)")
        }
        (Err(error), None) => bail!("cannot connect to {addr}: {error}"),
    };
    let transport = match &patient.options.tls {
        Some(trust) => tls::describe(&wire.stream, trust).unwrap_or_default(),
        None => "plain TCP".to_string(),
    };
    wire.send(&get_request(path, host))
        .await
        .with_context(|| format!("sending GET {path} to {addr}"))?;
    let limit = Duration::from_secs(5);
    match tokio::time::timeout(limit, wire.read_response("GET")).await {
        Err(_) => bail!(
            "{addr} accepted the connection but sent no HTTP response to GET {path} within {limit:?}"
        ),
        Ok(Err(_)) if is_tls_record(wire.unread()) => bail!("{addr} {SPEAKS_TLS}"),
        Ok(Err(WireError::Garbage(what))) => bail!("{addr} does not speak HTTP/1.x: {what}"),
        Ok(Err(WireError::Closed { partial: 0 })) => bail!(
            "{addr} did not answer GET {path}: the peer closed the connection before sending \
             anything (a TLS port may do that to plain HTTP, which is all the doctor speaks)"
        ),
        Ok(Err(error)) => bail!("{addr} did not answer GET {path}: {error}"),
        // nginx's answer on a port with `ssl` to a plain-HTTP request.
        Ok(Ok(response))
            if response.status == 400
                && String::from_utf8_lossy(&response.body).contains("sent to HTTPS port") =>
        {
            bail!("{addr} {SPEAKS_TLS} (it answered 400: plain HTTP sent to an HTTPS port)")
        }
        Ok(Ok(response)) => Ok((response.status, transport)),
    }
}

/// What the doctor says of a port that speaks TLS, spoken to in plain HTTP.
const SPEAKS_TLS: &str = "speaks TLS: give https://HOST:PORT (with --insecure for a \
    self-signed certificate, or --ca FILE), or --tls with a command";

/// A TLS record's first bytes: an alert (21) or a handshake (22), then
/// major version 3 (every SSL 3 and TLS version writes 3 there).
pub fn is_tls_record(bytes: &[u8]) -> bool {
    matches!(bytes, [21 | 22, 3, ..])
}

/// Where the report's lines come from while the checks run.
pub trait Progress: Send + Sync {
    fn started(&self, checks: &[Check], bound: Duration);
    fn finished(&self, finding: &Finding, done: usize, of: usize);
    /// The load checks handed the machine on to the next server, after
    /// waiting this long for this one to go quiet ([`Turn::hand_on`]).
    fn handed_on(&self, _waited: Duration) {}
}

/// Returns once nothing accepts connections on `addr`, or after `limit`.
async fn until_closed(addr: SocketAddr, limit: Duration) {
    let started = std::time::Instant::now();
    while started.elapsed() < limit && tokio::net::TcpStream::connect(addr).await.is_ok() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs the chosen checks. `Err` means the doctor could not probe at all.
/// `turn` is this server's place among servers probed at once (the lab);
/// the `doctor` command probes one, `Turn::alone()`.
pub async fn run(options: &Options, progress: &dyn Progress, turn: Turn) -> Result<Examined> {
    let (patient, mut child, transport) = connect(options).await?;
    let wanted = |check: Check| options.checks.contains(&check);
    progress.started(&options.checks, longest(options));
    let total = options.checks.len();
    let (found, mut findings_in) = mpsc::unbounded_channel();
    let mut running = JoinSet::new();
    // The HTTP/2 checks skip, all with one reason, where HTTP/2 cannot be
    // spoken; otherwise they watch beside the others.
    // With only HTTP/2 checks, the first answer came over HTTP/2 already.
    let h2_skip = match options.checks.iter().any(|check| check.is_http2()) {
        true if !options.http2_only() => h2::unavailable(&patient).await,
        _ => None,
    };
    for check in Check::HTTP2.into_iter().filter(|check| wanted(*check)) {
        if let Some(why) = &h2_skip {
            let _ = found.send(Event::Found(Finding::skip(check, why.clone())));
        }
    }
    // The checks that hold one connection (or one request) and wait: side by
    // side, each under its bound, so the run takes about one window.
    for (check, start_check) in WATCHING {
        if wanted(check) && !(check.is_http2() && h2_skip.is_some()) {
            let limit = bound(check, options);
            let work = start_check(patient.clone());
            let found = found.clone();
            running.spawn(async move {
                let _ = found.send(Event::Found(bounded(check, limit, work).await));
            });
        }
    }
    // Beside them, the checks that load the server.
    let server = child.as_ref().map(ChildGuard::pid);
    running.spawn(loads(patient.clone(), turn, server, found));
    let mut findings = Vec::new();
    while let Some(event) = findings_in.recv().await {
        match event {
            Event::Found(finding) => {
                findings.push(finding);
                progress.finished(findings.last().expect("just pushed"), findings.len(), total);
            }
            Event::HandedOn(waited) => progress.handed_on(waited),
        }
    }
    while let Some(done) = running.join_next().await {
        done.context("a check panicked")?;
    }
    // The shutdown check starts the command again itself.
    if let Some(mut child) = child.take() {
        child.kill_group()?;
        // A server's own children (Apache's, gunicorn's workers) die a
        // moment after the group's SIGKILL, and may hold the port until then.
        until_closed(patient.addr, Duration::from_secs(2)).await;
        if wanted(Check::Shutdown) {
            let limit = bound(Check::Shutdown, options);
            let work = Box::pin(async { shutdown::shutdown(&patient).await });
            findings.push(bounded(Check::Shutdown, limit, work).await);
            progress.finished(findings.last().expect("just pushed"), findings.len(), total);
        }
    } else if wanted(Check::Shutdown) {
        findings.push(shutdown::shutdown(&patient).await?);
        progress.finished(findings.last().expect("just pushed"), findings.len(), total);
    }
    // Its HTTP/2 twin starts the command again, after the shutdown check.
    if wanted(Check::H2Goaway) && h2_skip.is_none() {
        let limit = bound(Check::Shutdown, options);
        let work = Box::pin(async { h2::goaway(&patient).await });
        findings.push(bounded(Check::H2Goaway, limit, work).await);
        progress.finished(findings.last().expect("just pushed"), findings.len(), total);
    }
    findings.sort_by_key(|finding| {
        Check::ALL
            .iter()
            .position(|check| check.name() == finding.check)
    });
    Ok(Examined {
        findings,
        transport,
    })
}

/// The server to probe, started first if the reader gave its command, and
/// what its first answer came over ([`Examined::transport`]).
async fn connect(options: &Options) -> Result<(Patient, Option<ChildGuard>, String)> {
    // The name TLS asks for and checks: the host typed, or `localhost` for
    // a command's server.
    let (host, addr, child, name) = match &options.target {
        Target::Listening(target) => {
            let addr = resolve_target(target, options.allow_remote).await?;
            (target.clone(), addr, None, host_name(target).to_string())
        }
        Target::Command { port, command } => {
            let child = start(*port, command).await?;
            let addr = SocketAddr::from(([127, 0, 0, 1], *port));
            (addr.to_string(), addr, Some(child), "localhost".to_string())
        }
    };
    let (connector, h2) = match &options.tls {
        Some(trust) => (
            tls::connector(&name, trust, b"http/1.1")?,
            Some(tls::connector(&name, trust, b"h2")?),
        ),
        None => (Connector::Plain, options.h2c.then_some(Connector::Plain)),
    };
    let patient = Patient {
        addr,
        host,
        options: options.clone(),
        connector,
        h2,
    };
    // A server asked for HTTP/2 alone answers its first request in HTTP/2.
    let transport = if options.http2_only() {
        h2::first_answer(&patient).await?
    } else {
        first_answer(&patient).await?.1
    };
    Ok((patient, child, transport))
}

/// The host in `HOST:PORT` (`[::1]:443` gives `::1`).
fn host_name(target: &str) -> &str {
    let host = target.rsplit_once(':').map_or(target, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// The longest the checks can take: the watchers beside the loads, then the
/// shutdown (on a turn of its own, add the turns before it).
fn longest(options: &Options) -> Duration {
    let limit_of = |check: Check| {
        if options.checks.contains(&check) {
            bound(check, options)
        } else {
            Duration::ZERO
        }
    };
    let chain = limit_of(Check::BlockedRuntime)
        + limit_of(Check::Overload).max(limit_of(Check::RetryAfter))
        + limit_of(Check::SlowRead);
    let watchers = WATCHING
        .iter()
        .map(|(check, _)| limit_of(*check))
        .max()
        .unwrap_or_default();
    watchers.max(chain) + limit_of(Check::Shutdown) + limit_of(Check::H2Goaway)
}

/// The checks that hold a connection (or a request) and wait.
const WATCHING: [(Check, StartCheck); 9] = [
    (Check::IdleKeepAlive, |p| {
        Box::pin(async move { watch::idle_keepalive(&p).await })
    }),
    (Check::SlowHead, |p| {
        Box::pin(async move { watch::slow_head(&p).await })
    }),
    (Check::SlowBody, |p| {
        Box::pin(async move { watch::slow_body(&p).await })
    }),
    (Check::HandlerDeadline, |p| {
        Box::pin(async move { deadline::handler_deadline(&p).await })
    }),
    (Check::H2Idle, |p| {
        Box::pin(async move { h2::idle(&p).await })
    }),
    (Check::H2SlowHead, |p| {
        Box::pin(async move { h2::slow_head(&p).await })
    }),
    (Check::H2SlowBody, |p| {
        Box::pin(async move { h2::slow_body(&p).await })
    }),
    (Check::H2Streams, |p| {
        Box::pin(async move { h2::streams(&p).await })
    }),
    (Check::H2Cancel, |p| {
        Box::pin(async move { h2::cancel(&p).await })
    }),
];

/// The checks that load the server, on this server's turn and one after
/// another (a burst would spoil another's timing): the blocked runtime, the
/// overload (and Retry-After), then the slow read, whose thousands of
/// pipelined requests keep a server busy while they go in, which would slow
/// the blocked-runtime check's canary before its burst. Once the slow read's
/// writes stall and the server is quiet, the turn passes on while it watches.
async fn loads(
    patient: Patient,
    mut turn: Turn,
    server: Option<i32>,
    found: mpsc::UnboundedSender<Event>,
) {
    let options = &patient.options;
    let wanted = |check: Check| options.checks.contains(&check);
    turn.take().await;
    if wanted(Check::BlockedRuntime) {
        let work = Box::pin(async { load::blocked_runtime(&patient).await });
        let limit = bound(Check::BlockedRuntime, options);
        let _ = found.send(Event::Found(
            bounded(Check::BlockedRuntime, limit, work).await,
        ));
    }
    if wanted(Check::Overload) || wanted(Check::RetryAfter) {
        let limit = bound(Check::Overload, options);
        let (overload, retry_after) =
            match tokio::time::timeout(limit, load::overload(&patient)).await {
                Ok(Ok(pair)) => pair,
                Ok(Err(error)) => (
                    failure(Check::Overload, limit, Some(&error)),
                    failure(Check::RetryAfter, limit, Some(&error)),
                ),
                Err(_) => (
                    failure(Check::Overload, limit, None),
                    failure(Check::RetryAfter, limit, None),
                ),
            };
        for (check, finding) in [
            (Check::Overload, overload),
            (Check::RetryAfter, retry_after),
        ] {
            if wanted(check) {
                let _ = found.send(Event::Found(finding));
            }
        }
    }
    if wanted(Check::SlowRead) {
        let limit = bound(Check::SlowRead, options);
        let work = async {
            let filled = slow_read::fill(&patient).await?;
            if let Some(waited) = turn.hand_on(server).await {
                let _ = found.send(Event::HandedOn(waited));
            }
            match filled {
                slow_read::Filled::Stalled(stalled) => slow_read::watch(&patient, stalled).await,
                slow_read::Filled::Found(finding) => Ok(finding),
            }
        };
        let _ = found.send(Event::Found(bounded(Check::SlowRead, limit, work).await));
    }
    if let Some(waited) = turn.hand_on(server).await {
        let _ = found.send(Event::HandedOn(waited));
    }
}

/// What the checks running side by side report as they go.
enum Event {
    Found(Finding),
    HandedOn(Duration),
}

/// A watching check, started on its own copy of the probe.
type StartCheck = fn(Patient) -> CheckFuture;
type CheckFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Finding>> + Send>>;

/// A check under its time bound: a hang or an error becomes a failed finding.
async fn bounded<F>(check: Check, limit: Duration, work: F) -> Finding
where
    F: std::future::Future<Output = Result<Finding>>,
{
    match tokio::time::timeout(limit, work).await {
        Ok(Ok(finding)) => finding,
        Ok(Err(error)) => failure(check, limit, Some(&error)),
        Err(_) => failure(check, limit, None),
    }
}

/// The finding of a check that ended in an error (`Some`) or hung (`None`).
fn failure(check: Check, limit: Duration, error: Option<&anyhow::Error>) -> Finding {
    match error {
        Some(error) => Finding::fail(check, "could not finish", None, format!("{error:#}")),
        None => Finding::fail(
            check,
            format!("no result within {}", crate::finding::seconds(limit)),
            None,
            "the check hung past its bound: the server stopped answering",
        ),
    }
}
