//! `lab-shutdown-drain probe --port P -- <command...>`: start any server
//! command, drive traffic at it, send it SIGTERM, and report how it shut
//! down. The server can be written in anything; the probe only speaks HTTP
//! to 127.0.0.1:P and signals the process it started.
//!
//! Report: one JSON object on stdout, the same as sentences on stderr.
//! Exit code: 0 for a clean shutdown (exit 0 within the grace period, every
//! in-flight request completed), 1 when the probe ran and found a problem, 2
//! when it could not probe (bad arguments, a command that does not start or
//! never listens).

use std::{
    io::Write,
    net::{Ipv4Addr, SocketAddr},
    process::Stdio,
    time::Duration,
};

use anyhow::{Context, Result, anyhow, bail};
use tokio::{sync::watch, task::JoinSet};

use lab_kit::{
    child::ChildGuard,
    clock::monotonic_ms,
    conn::Connector,
    exit::{self, Exit},
    fetch::{FetchError, Fetcher},
    flags::Flags,
    net::AbortOnDrop,
};

use crate::probe_report::{Asked, Observed, Seen, ShutdownProbeReport};

/// The probe's command line.
#[derive(Debug, Clone, PartialEq)]
pub struct ShutdownProbeConfig {
    pub port: u16,
    /// Steady traffic goes here.
    pub path: String,
    pub ready_path: String,
    /// The long requests in flight at SIGTERM go here (default: `path`).
    pub slow_path: String,
    pub in_flight: usize,
    /// Orchestrator's grace period: SIGKILL after this.
    pub grace: Duration,
    pub start_timeout: Duration,
    pub warmup: Duration,
    pub interval: Duration,
    pub command: Vec<String>,
}

impl ShutdownProbeConfig {
    /// What the report repeats of it.
    pub fn asked(&self) -> Asked<'_> {
        Asked {
            command: &self.command,
            port: self.port,
            ready_path: &self.ready_path,
            grace: self.grace,
        }
    }
}

pub const USAGE: &str = "Usage: lab-shutdown-drain probe --port P [--path /] [--ready-path /readyz]
         [--slow-path PATH] [--in-flight 3] [--grace-ms 10000] [--start-timeout-ms 10000]
         [--warmup-ms 500] [--interval-ms 20] -- <command> [args...]

Starts <command> (which must listen on 127.0.0.1:P), sends traffic, sends it SIGTERM,
and reports readiness, in-flight requests, refusals, resets, exit code and time to exit.";

pub fn parse_args(args: &[String]) -> Result<ShutdownProbeConfig> {
    let split = args
        .iter()
        .position(|arg| arg == "--")
        .context("no command: put it after `--`")?;
    let (flags, command) = (&args[..split], &args[split + 1..]);
    if command.is_empty() {
        bail!("no command after `--`");
    }
    let mut config = ShutdownProbeConfig {
        port: 0,
        path: "/".into(),
        ready_path: "/readyz".into(),
        slow_path: String::new(),
        in_flight: 3,
        grace: Duration::from_secs(10),
        start_timeout: Duration::from_secs(10),
        warmup: Duration::from_millis(500),
        interval: Duration::from_millis(20),
        command: command.to_vec(),
    };
    let mut pairs = Flags::new(flags).for_what("probe");
    while let Some(flag) = pairs.next_flag()? {
        let number = || -> Result<u64> { flag.parse("a whole number") };
        match flag.name {
            "--port" => config.port = u16::try_from(number()?).context("--port is not a port")?,
            "--path" => config.path = flag.value.to_string(),
            "--ready-path" => config.ready_path = flag.value.to_string(),
            "--slow-path" => config.slow_path = flag.value.to_string(),
            "--in-flight" => config.in_flight = number()? as usize,
            "--grace-ms" => config.grace = Duration::from_millis(number()?),
            "--start-timeout-ms" => config.start_timeout = Duration::from_millis(number()?),
            "--warmup-ms" => config.warmup = Duration::from_millis(number()?),
            "--interval-ms" => config.interval = Duration::from_millis(number()?.max(1)),
            _ => return Err(flag.unknown()),
        }
    }
    if config.port == 0 {
        bail!("--port P is required (the port the command will listen on)");
    }
    for path in [&config.path, &config.ready_path] {
        if !path.starts_with('/') {
            bail!("{path:?} is not a path (it must start with /)");
        }
    }
    if config.slow_path.is_empty() {
        config.slow_path = config.path.clone();
    }
    Ok(config)
}

async fn get(client: &Fetcher, url: &str, timeout: Duration) -> (Seen, i64) {
    match client.get(url, timeout).await {
        Ok(fetched) => {
            let status = i64::from(fetched.status);
            let seen = match status {
                _ if !fetched.body_complete => Seen::Reset,
                503 => Seen::Unavailable,
                500.. => Seen::OtherStatus,
                _ => Seen::Ok,
            };
            (seen, status)
        }
        Err(FetchError::Timeout) => (Seen::Timeout, -1),
        Err(FetchError::Connect) => (Seen::Refused, -1),
        Err(FetchError::Other) => (Seen::Reset, -1),
    }
}

/// The readiness poller, with a fresh connection per poll as a kubelet
/// probe makes, and the keep-alive client of the steady traffic (a
/// balancer's pool): plain or TLS, as `connector` says.
fn clients(connector: &Connector, target: SocketAddr) -> Result<(Fetcher, Fetcher)> {
    if connector.is_tls() {
        return Ok((
            Fetcher::tls(connector.clone(), target, false),
            Fetcher::tls(connector.clone(), target, true),
        ));
    }
    let poller = lab_kit::client::fresh_connection_client("the readiness client")?;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("building the client")?;
    Ok((Fetcher::Reqwest(poller), Fetcher::Reqwest(client)))
}

/// Runs the probe. `Err` means it could not probe; the child is killed and
/// reaped before this returns, whatever happened.
pub async fn probe(config: &ShutdownProbeConfig) -> Result<ShutdownProbeReport> {
    probe_with(config, &Connector::Plain).await
}

/// [`probe`], speaking to the server as `connector` says: plain, or TLS (the
/// doctor's https:// targets).
pub async fn probe_with(
    config: &ShutdownProbeConfig,
    connector: &Connector,
) -> Result<ShutdownProbeReport> {
    let target = SocketAddr::from((Ipv4Addr::LOCALHOST, config.port));
    let (mut child, listened_after_ms) = start_command(config, target).await?;
    let pid = child.pid();
    let base = format!("http://{target}");
    let short = Duration::from_millis(1_000);
    let (poller, client) = clients(connector, target)?;
    let ready_url = format!("{base}{}", config.ready_path);
    let (_, ready_status_before) = get(&poller, &ready_url, short).await;

    // Steady traffic on the keep-alive client, readiness polls beside it;
    // both until told to stop.
    let (stop, stopped) = watch::channel(false);
    let traffic = AbortOnDrop::spawn(drive(
        client.clone(),
        format!("{base}{}", config.path),
        config.interval,
        short,
        stopped.clone(),
    ));
    let polls = AbortOnDrop::spawn(drive(
        poller,
        ready_url,
        config.interval.max(Duration::from_millis(20)),
        short,
        stopped,
    ));
    tokio::time::sleep(config.warmup).await;
    let mut in_flight = JoinSet::new();
    for _ in 0..config.in_flight {
        let client = client.clone();
        let url = format!("{base}{}", config.slow_path);
        let limit = config.grace + Duration::from_secs(2);
        in_flight.spawn(async move { get(&client, &url, limit).await.0 });
    }
    tokio::time::sleep(Duration::from_millis(50)).await;

    child.signal(libc::SIGTERM)?;
    let sigterm_at = monotonic_ms();
    eprintln!("probe: SIGTERM sent to pid {pid}");
    let (ended, killed_after_grace) = match child.wait_for(config.grace).await? {
        Some(ended) => (ended, false),
        None => {
            eprintln!(
                "probe: pid {pid} still running {:?} after SIGTERM; SIGKILL",
                config.grace
            );
            (child.kill_group()?, true)
        }
    };
    let exit_at = monotonic_ms();
    // A little more traffic: what a balancer that has not noticed would see.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = stop.send(true);
    // Every request has a timeout of its own; these bounds are a backstop.
    let collect_limit = short + Duration::from_secs(2);
    let traffic = traffic
        .join_within(collect_limit)
        .await
        .context("the traffic did not stop")?;
    let polls = polls
        .join_within(collect_limit)
        .await
        .context("the readiness polls did not stop")?;
    let mut in_flight_seen = Vec::new();
    while let Some(joined) = in_flight.join_next().await {
        in_flight_seen.push(joined.context("an in-flight request panicked")?);
    }
    drop(child);
    let started = |records: &[(f64, Seen, f64)]| -> Vec<(f64, Seen)> {
        records.iter().map(|&(at, seen, _)| (at, seen)).collect()
    };
    let observed = Observed {
        child_pid: pid,
        listened_after_ms,
        ready_status_before,
        polls: started(&polls),
        polls_answered: polls.iter().map(|&(_, seen, done)| (done, seen)).collect(),
        traffic: started(&traffic),
        in_flight: in_flight_seen,
        sigterm_at,
        exit_at,
        ended,
        killed_after_grace,
    };
    Ok(ShutdownProbeReport::from_observed(
        &observed,
        config.asked(),
    ))
}

/// Starts the command once nothing else listens on `target`, and waits
/// until it listens there: the child, and the ms that took.
async fn start_command(
    config: &ShutdownProbeConfig,
    target: SocketAddr,
) -> Result<(ChildGuard, f64)> {
    if tokio::net::TcpStream::connect(target).await.is_ok() {
        bail!("something already listens on {target}: stop it, or pick another --port");
    }
    // The command's stdout goes to our stderr: our stdout is the report.
    let mut child = ChildGuard::spawn(
        &config.command[0],
        &config.command[1..],
        Stdio::from(std::io::stderr()),
    )?;
    let pid = child.pid();
    eprintln!("probe: started pid {pid}: {}", config.command.join(" "));
    let listened_after_ms = wait_until_listening(&mut child, target, config.start_timeout).await?;
    Ok((child, listened_after_ms))
}

/// Waits until `target` accepts a connection; the ms it took. Fails, killing
/// the child, if it exits first or takes longer than `limit`. The doctor
/// starts a reader's command with it too.
pub async fn wait_until_listening(
    child: &mut ChildGuard,
    target: SocketAddr,
    limit: Duration,
) -> Result<f64> {
    let pid = child.pid();
    let started = monotonic_ms();
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if tokio::net::TcpStream::connect(target).await.is_ok() {
            return Ok(monotonic_ms() - started);
        }
        if let Some(ended) = child.try_ended()? {
            bail!(
                "the command exited ({}) before it listened on {target} (pid {pid})",
                ended.describe()
            );
        }
        if tokio::time::Instant::now() >= deadline {
            child.kill_group()?;
            bail!("the command did not listen on {target} within {limit:?}; killed it (pid {pid})");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Requests to `url` every `interval` until stopped; (start time, outcome,
/// time the outcome arrived).
async fn drive(
    client: Fetcher,
    url: String,
    interval: Duration,
    timeout: Duration,
    mut stopped: watch::Receiver<bool>,
) -> Vec<(f64, Seen, f64)> {
    let mut requests = JoinSet::new();
    let mut ticker = tokio::time::interval(interval);
    for _ in 0..100_000 {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stopped.changed() => break,
        }
        let (client, url) = (client.clone(), url.clone());
        requests.spawn(async move {
            let start = monotonic_ms();
            let seen = get(&client, &url, timeout).await.0;
            (start, seen, monotonic_ms())
        });
    }
    let mut seen = Vec::new();
    while let Some(joined) = requests.join_next().await {
        if let Ok(record) = joined {
            seen.push(record);
        }
    }
    seen
}

/// Who speaks in the probe's error line.
const PROGRAM: &str = concat!(env!("CARGO_PKG_NAME"), " probe");

/// `main` for `probe`: prints the report (or the error) and returns the exit code.
pub fn probe_main(args: &[String]) -> Exit {
    if lab_kit::flags::asks_for_help(args) {
        // A closed pipe (`| head`) is not an error worth a panic.
        let _ = writeln!(std::io::stdout(), "{USAGE}");
        return Exit::Success;
    }
    let outcome = parse_args(args).and_then(|config| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("starting the tokio runtime")?;
        let report = runtime.block_on(probe(&config));
        runtime.shutdown_timeout(Duration::from_millis(500));
        report
    });
    match outcome {
        Ok(report) => {
            eprintln!("{}", report.verdict);
            match serde_json::to_string(&report) {
                Ok(line) => println!("{line}"),
                Err(error) => exit::report(PROGRAM, &anyhow!(error).context("encoding the report")),
            }
            if report.clean {
                Exit::Success
            } else {
                Exit::Failed
            }
        }
        Err(error) => {
            exit::report(PROGRAM, &error);
            println!("{}", serde_json::json!({ "error": format!("{error:#}") }));
            Exit::Error
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use lab_kit::flags::to_args as strings;

    #[test]
    fn parses_flags_and_the_command() {
        let config = parse_args(&strings(&[
            "--port",
            "8080",
            "--slow-path",
            "/slow",
            "--",
            "node",
            "server.js",
        ]))
        .expect("valid");
        assert_eq!(config.port, 8080);
        assert_eq!(config.slow_path, "/slow");
        assert_eq!(config.path, "/");
        assert_eq!(config.command, strings(&["node", "server.js"]));
    }

    #[test]
    fn refuses_bad_arguments_with_a_reason() {
        for bad in [
            &["--port", "8080"][..],
            &["--port", "8080", "--"],
            &["--", "server"],
            &["--port", "99999", "--", "server"],
            &["--port", "80", "--path", "x", "--", "server"],
            &["--bogus", "1", "--port", "80", "--", "server"],
        ] {
            assert!(parse_args(&strings(bad)).is_err(), "{bad:?} was accepted");
        }
    }
}
