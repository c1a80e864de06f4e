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
    net::{Ipv4Addr, SocketAddr},
    process::Stdio,
    time::Duration,
};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use tokio::{sync::watch, task::JoinSet};

use lab_kit::{
    child::{ChildGuard, Ended},
    clock::monotonic_ms,
    flags::Flags,
};

/// The probe's command line.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeConfig {
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

pub const USAGE: &str = "Usage: lab-shutdown-drain probe --port P [--path /] [--ready-path /readyz]
         [--slow-path PATH] [--in-flight 3] [--grace-ms 10000] [--start-timeout-ms 10000]
         [--warmup-ms 500] [--interval-ms 20] -- <command> [args...]

Starts <command> (which must listen on 127.0.0.1:P), sends traffic, sends it SIGTERM,
and reports readiness, in-flight requests, refusals, resets, exit code and time to exit.";

pub fn parse_args(args: &[String]) -> Result<ProbeConfig> {
    let split = args
        .iter()
        .position(|arg| arg == "--")
        .context("no command: put it after `--`")?;
    let (flags, command) = (&args[..split], &args[split + 1..]);
    if command.is_empty() {
        bail!("no command after `--`");
    }
    let mut config = ProbeConfig {
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
    let mut pairs = Flags::new(flags);
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

/// What the probe saw. Times in ms after SIGTERM unless named otherwise; -1
/// where something never happened.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProbeReport {
    pub command: String,
    pub port: u16,
    pub child_pid: i64,
    /// From start to the first accepted connection.
    pub listened_after_ms: f64,
    /// `ready_path`'s status before SIGTERM (-1: no answer).
    pub ready_status_before: i64,
    /// First readiness poll answering 503 after SIGTERM.
    pub readiness_503_after_ms: f64,
    /// First refused connection after SIGTERM.
    pub refused_after_ms: f64,
    /// Readiness said 503 before any connection was refused: a balancer
    /// polling it could leave in time.
    pub readiness_before_refusing: bool,
    pub in_flight: u64,
    pub in_flight_completed: u64,
    pub in_flight_failed: u64,
    pub after_sigterm_requests: u64,
    pub after_sigterm_ok: u64,
    pub after_sigterm_503: u64,
    pub after_sigterm_refused: u64,
    pub after_sigterm_reset: u64,
    pub after_sigterm_other: u64,
    /// "0", "1", "signal 15 (SIGTERM)", "signal 9 (SIGKILL)".
    pub exit: String,
    pub exit_code: i64,
    pub time_to_exit_ms: f64,
    /// Still running at the end of the grace period, so killed.
    pub killed_after_grace: bool,
    pub clean: bool,
    pub verdict: String,
}

/// How one probe request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// Any status below 500.
    Ok,
    Unavailable,
    OtherStatus,
    Refused,
    /// Connection closed or reset before a whole response.
    Reset,
    Timeout,
}

async fn get(client: &reqwest::Client, url: &str, timeout: Duration) -> (Seen, i64) {
    match client.get(url).timeout(timeout).send().await {
        Ok(response) => {
            let status = i64::from(response.status().as_u16());
            let body = response.bytes().await;
            let seen = match (status, body) {
                (_, Err(_)) => Seen::Reset,
                (503, _) => Seen::Unavailable,
                (500.., _) => Seen::OtherStatus,
                _ => Seen::Ok,
            };
            (seen, status)
        }
        Err(error) if error.is_timeout() => (Seen::Timeout, -1),
        Err(error) if error.is_connect() => (Seen::Refused, -1),
        Err(_) => (Seen::Reset, -1),
    }
}

/// Runs the probe. `Err` means it could not probe; the child is killed and
/// reaped before this returns, whatever happened.
pub async fn probe(config: &ProbeConfig) -> Result<ProbeReport> {
    let target = SocketAddr::from((Ipv4Addr::LOCALHOST, config.port));
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
    let started = monotonic_ms();
    let start_deadline = tokio::time::Instant::now() + config.start_timeout;
    loop {
        if tokio::net::TcpStream::connect(target).await.is_ok() {
            break;
        }
        if let Some(ended) = child.try_ended()? {
            bail!(
                "the command exited ({}) before it listened on {target} (pid {pid})",
                ended.describe()
            );
        }
        if tokio::time::Instant::now() >= start_deadline {
            child.kill_group()?;
            bail!(
                "the command did not listen on {target} within {:?}; killed it (pid {pid})",
                config.start_timeout
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let listened_after_ms = monotonic_ms() - started;
    let base = format!("http://{target}");
    let short = Duration::from_millis(1_000);
    // A fresh connection per readiness poll, as a kubelet probe makes.
    let poller = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .build()
        .context("building the readiness client")?;
    let (_, ready_status_before) =
        get(&poller, &format!("{base}{}", config.ready_path), short).await;

    // Steady traffic on a keep-alive client (a balancer's pool), readiness
    // polls beside it; both until told to stop.
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("building the client")?;
    let (stop, stopped) = watch::channel(false);
    let traffic = tokio::spawn(drive(
        client.clone(),
        format!("{base}{}", config.path),
        config.interval,
        short,
        stopped.clone(),
    ));
    let polls = tokio::spawn(drive(
        poller.clone(),
        format!("{base}{}", config.ready_path),
        config.interval.max(Duration::from_millis(20)),
        short,
        stopped.clone(),
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
    let traffic = traffic.await.context("the traffic task panicked")?;
    let polls = polls.await.context("the readiness task panicked")?;
    let mut in_flight_seen = Vec::new();
    while let Some(joined) = in_flight.join_next().await {
        in_flight_seen.push(joined.context("an in-flight request panicked")?);
    }
    drop(child);

    let after = |records: &[(f64, Seen)], wanted: Seen| {
        records
            .iter()
            .filter(|(at, seen)| *at >= sigterm_at && *seen == wanted)
            .map(|(at, _)| at - sigterm_at)
            .fold(f64::INFINITY, f64::min)
    };
    let readiness_503 = after(&polls, Seen::Unavailable);
    let refused = after(&polls, Seen::Refused).min(after(&traffic, Seen::Refused));
    let after_sigterm: Vec<Seen> = traffic
        .iter()
        .filter(|(at, _)| *at >= sigterm_at)
        .map(|(_, seen)| *seen)
        .collect();
    let tally = |wanted: &[Seen]| {
        after_sigterm
            .iter()
            .filter(|seen| wanted.contains(seen))
            .count() as u64
    };
    let completed = in_flight_seen
        .iter()
        .filter(|&&seen| seen == Seen::Ok)
        .count() as u64;
    let never = |millis: f64| if millis.is_finite() { millis } else { -1.0 };
    let mut report = ProbeReport {
        command: config.command.join(" "),
        port: config.port,
        child_pid: i64::from(pid),
        listened_after_ms,
        ready_status_before,
        readiness_503_after_ms: never(readiness_503),
        refused_after_ms: never(refused),
        readiness_before_refusing: readiness_503.is_finite() && readiness_503 < refused,
        in_flight: in_flight_seen.len() as u64,
        in_flight_completed: completed,
        in_flight_failed: in_flight_seen.len() as u64 - completed,
        after_sigterm_requests: after_sigterm.len() as u64,
        after_sigterm_ok: tally(&[Seen::Ok]),
        after_sigterm_503: tally(&[Seen::Unavailable]),
        after_sigterm_refused: tally(&[Seen::Refused]),
        after_sigterm_reset: tally(&[Seen::Reset]),
        after_sigterm_other: tally(&[Seen::OtherStatus, Seen::Timeout]),
        exit: ended.describe(),
        exit_code: i64::from(ended.shell_code()),
        time_to_exit_ms: exit_at - sigterm_at,
        killed_after_grace,
        clean: false,
        verdict: String::new(),
    };
    report.clean = ended == Ended::Code(0) && !killed_after_grace && report.in_flight_failed == 0;
    report.verdict = verdict(&report, config);
    Ok(report)
}

/// Requests to `url` every `interval` until stopped; (start time, outcome).
async fn drive(
    client: reqwest::Client,
    url: String,
    interval: Duration,
    timeout: Duration,
    mut stopped: watch::Receiver<bool>,
) -> Vec<(f64, Seen)> {
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
            (start, get(&client, &url, timeout).await.0)
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

/// The report as sentences, one a line.
fn verdict(report: &ProbeReport, config: &ProbeConfig) -> String {
    let mut lines = Vec::new();
    lines.push(match report.ready_status_before {
        200 => format!("{} answered 200 before SIGTERM", config.ready_path),
        -1 => format!("{} did not answer before SIGTERM", config.ready_path),
        status => format!(
            "{} answered {status} before SIGTERM: no readiness endpoint there?",
            config.ready_path
        ),
    });
    lines.push(
        match (report.readiness_503_after_ms, report.refused_after_ms) {
            (ready, refused) if ready >= 0.0 && (refused < 0.0 || ready < refused) => format!(
                "readiness turned 503 {ready:.0} ms after SIGTERM{}",
                if refused >= 0.0 {
                    format!(", {:.0} ms before the first refused connection", refused - ready)
                } else {
                    String::new()
                }
            ),
            (_, refused) if refused >= 0.0 => format!(
                "connections were refused {refused:.0} ms after SIGTERM with no 503 from readiness first: a balancer finds out only by failing requests"
            ),
            _ => "readiness never answered 503 and no connection was refused".into(),
        },
    );
    lines.push(format!(
        "{} of {} requests in flight at SIGTERM completed",
        report.in_flight_completed, report.in_flight
    ));
    lines.push(format!(
        "after SIGTERM: {} requests, {} ok, {} answered 503, {} refused, {} reset, {} other failures",
        report.after_sigterm_requests,
        report.after_sigterm_ok,
        report.after_sigterm_503,
        report.after_sigterm_refused,
        report.after_sigterm_reset,
        report.after_sigterm_other
    ));
    lines.push(if report.killed_after_grace {
        format!(
            "did not exit within the {:.0} ms grace period after SIGTERM (it ignored it or never finished draining): killed with SIGKILL",
            config.grace.as_secs_f64() * 1000.0
        )
    } else if report.exit_code == 128 + libc::SIGTERM as i64 {
        format!(
            "died of SIGTERM itself after {:.0} ms: no handler, so no drain",
            report.time_to_exit_ms
        )
    } else {
        format!(
            "exited with {} {:.0} ms after SIGTERM",
            report.exit, report.time_to_exit_ms
        )
    });
    lines.push(if report.clean {
        "verdict: clean shutdown".into()
    } else {
        "verdict: requests or the exit were not clean (see above)".into()
    });
    lines.join("\n")
}

/// `main` for `probe`: prints the report (or the error) and returns the exit code.
pub fn probe_main(args: &[String]) -> i32 {
    if args.iter().any(|arg| arg == "-h" || arg == "--help") && !args.contains(&"--".into()) {
        println!("{USAGE}");
        return 0;
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
                Err(error) => eprintln!("error: encoding the report: {error}"),
            }
            if report.clean { 0 } else { 1 }
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            println!("{}", serde_json::json!({ "error": format!("{error:#}") }));
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| item.to_string()).collect()
    }

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
