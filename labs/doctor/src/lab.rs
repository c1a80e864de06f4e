//! The lab: the doctor against three servers. The two Rust services of
//! [`crate::services`] run as child processes (this binary's `serve`), with
//! production time compressed as in the server-timeouts lab, and the doctor
//! watches them on the same compressed clock. A Node server with Node's
//! defaults runs where `node` is installed, on the real clock (its timeouts
//! cannot be compressed), with a shorter window in quick mode.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use lab_kit::{Lab, Mode, Output, lab::Subcommand};
use lab_server_timeouts::HARDENED;
use serde::{Deserialize, Serialize};

use crate::{
    checks::{self, Progress},
    compare,
    finding::{Check, Finding, Grade},
    options::Options,
    services::{PATHS, Service},
};

/// What one run measures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// Production seconds per lab second for the Rust services (50: the
    /// balancer's 60 s idle timeout runs as 1.2 s).
    pub time_scale: f64,
    /// How long the doctor watches the Node server, real seconds.
    pub node_window_s: f64,
    /// The shutdown check's grace period, real seconds.
    pub grace_s: f64,
    /// The overload check's callers give up after this, real seconds.
    pub caller_timeout_s: f64,
    pub max_in_flight: usize,
}

impl Lab for Config {
    const MANIFEST: &str = include_str!("../Cargo.toml");

    const SUBCOMMANDS: &[Subcommand] = &[Subcommand::new(
        "serve",
        "one of the lab's services: serve stock-axum|hardened --port P [--scale S] [--graceful true]",
        crate::services::serve_main,
    )];

    fn for_mode(mode: Mode) -> Config {
        Config {
            time_scale: mode.pick(50.0, 10.0),
            // Quick: past the 10 s body timeout the chapters recommend. Full:
            // past 1.5 times the balancer's 60 s, where the slow head can be
            // judged, and past Node's 60 s headersTimeout, which Node checks
            // every 30 s (connectionsCheckingInterval).
            node_window_s: mode.pick(12.0, 100.0),
            grace_s: 5.0,
            caller_timeout_s: 1.0,
            max_in_flight: 64,
        }
    }

    fn time_scale(&self) -> f64 {
        self.time_scale
    }

    async fn run(&self, out: &mut Output) -> Result<()> {
        run(self, out).await
    }
}

impl Config {
    /// The doctor's options for one server: its command, on a free port.
    pub fn options(&self, command: Vec<String>, port: u16, compressed: bool) -> Options {
        let scale = if compressed { self.time_scale } else { 1.0 };
        let at_scale = |seconds: f64| Duration::from_secs_f64(seconds / scale);
        let mut args = vec!["--port".to_string(), port.to_string()];
        for (flag, path) in PATHS {
            args.extend([flag.to_string(), path.to_string()]);
        }
        args.push("--".into());
        args.extend(command);
        let mut options = crate::options::parse(&args).expect("the lab's own arguments parse");
        options.balancer_idle = at_scale(HARDENED.balancer_idle_s);
        options.window = if compressed {
            at_scale(HARDENED.window_s)
        } else {
            Duration::from_secs_f64(self.node_window_s)
        };
        options.grace = Duration::from_secs_f64(self.grace_s);
        options.caller_timeout = Duration::from_secs_f64(self.caller_timeout_s);
        options.max_in_flight = self.max_in_flight;
        options
    }
}

/// A server the lab points the doctor at.
#[derive(Clone)]
struct Subject {
    name: &'static str,
    command: Vec<String>,
    compressed: bool,
}

impl Subject {
    /// Its command, listening on `port`.
    fn command_on(&self, port: u16) -> Vec<String> {
        let mut command = self.command.clone();
        if self.name == "node" {
            command.push(port.to_string());
        } else {
            command.extend(["--port".into(), port.to_string()]);
        }
        command
    }
}

pub use crate::services::NODE_SERVER;

/// One finding as a record.
#[derive(Debug, Serialize)]
struct Row<'a> {
    server: &'a str,
    check: &'a str,
    grade: Grade,
    measured: &'a str,
    /// The finding in a table cell: "FAIL: still open at 2.20 s".
    cell: String,
    value: f64,
}

/// Per server: how the checks came out.
#[derive(Debug, Serialize)]
struct Tally {
    passed: usize,
    warned: usize,
    failed: usize,
    skipped: usize,
    took_s: f64,
    /// How long the server went on working after its load checks, before
    /// its turn passed to the next server (left out for the last, which
    /// hands on to no one).
    #[serde(skip_serializing_if = "Option::is_none")]
    quiet_after_s: Option<f64>,
    /// Production seconds per second of this server's clock.
    time_scale: f64,
    /// The doctor's window and balancer idle timeout for this server, in
    /// this server's (lab) seconds.
    window_s: f64,
    balancer_idle_s: f64,
    /// What ran the server: `node 20.20.2` (its `--version`), or `rust` for
    /// this lab's own services (their crates are in the run's meta).
    runtime: String,
}

/// Each finding as an indented line on stderr, named by its server (the
/// servers are probed at once); and how long the server took to go quiet
/// before its turn passed on.
struct Indented {
    server: &'static str,
    quiet_after: std::sync::Mutex<Option<Duration>>,
}

impl Progress for Indented {
    fn started(&self, _checks: &[Check], _bound: Duration) {}
    fn handed_on(&self, waited: Duration) {
        eprintln!(
            "  {} handed on after {:.2} s of waiting for quiet",
            self.server,
            waited.as_secs_f64()
        );
        if let Ok(mut quiet_after) = self.quiet_after.lock() {
            *quiet_after = Some(waited);
        }
    }
    fn finished(&self, finding: &Finding, done: usize, of: usize) {
        eprintln!(
            "  {} [{done}/{of}] {} {}: {}",
            self.server,
            finding.grade.label(),
            finding.check,
            finding.measured
        );
    }
}

/// The comparison with slowhttptest, as table cells (text where it could
/// not run, so that every reader's book has the row).
#[derive(Debug, Serialize)]
struct ComparisonRow {
    server: String,
    doctor: String,
    slowhttptest: String,
    difference: String,
    nginx_version: String,
    slowhttptest_version: String,
}

impl ComparisonRow {
    async fn from(outcome: Result<compare::Comparison>) -> ComparisonRow {
        match outcome {
            Ok(seen) => ComparisonRow {
                server: seen.server,
                doctor: format!("{:.2} s", seen.doctor_s),
                slowhttptest: format!("{:.0} s", seen.slowhttptest_s),
                difference: format!("{:.1} %", seen.difference_pct),
                nginx_version: seen.nginx_version,
                slowhttptest_version: seen.slowhttptest_version,
            },
            Err(error) => {
                let why = format!("not run: {error:#}");
                eprintln!("doctor: the slowhttptest comparison was {why}");
                ComparisonRow {
                    server: format!(
                        "nginx, client_header_timeout {}s",
                        compare::HEADER_TIMEOUT_S
                    ),
                    doctor: why.clone(),
                    slowhttptest: why.clone(),
                    difference: why,
                    nginx_version: compare::version_of("nginx", &["-v"]).await,
                    slowhttptest_version: compare::version_of("slowhttptest", &["-h"]).await,
                }
            }
        }
    }
}

async fn run(config: &Config, out: &mut Output) -> Result<()> {
    // Beside the servers: they wait on nginx's timer and on the servers in
    // the wild's idle connections, not on the CPU.
    let (comparison, servers, wild) = tokio::join!(
        compare::run(),
        servers(config, out),
        crate::wild::run(config.node_window_s, config.grace_s)
    );
    servers?;
    out.write_summary("slowhttptest", &ComparisonRow::from(comparison).await)?;
    for (series, row) in wild? {
        out.write_summary(&series, &row)?;
    }
    Ok(())
}

/// One server's probe: its options, how long it took, how long it took to go
/// quiet before handing on, and its findings.
struct Probed {
    options: Options,
    took: Duration,
    quiet_after: Option<Duration>,
    findings: Result<Vec<Finding>>,
}

async fn servers(config: &Config, out: &mut Output) -> Result<()> {
    let subjects = subjects(config)?;
    let probed = probe_all(config, &subjects).await?;
    let mut by_check: Vec<(Check, Vec<(&str, String)>)> = Check::HTTP1
        .iter()
        .map(|check| (*check, Vec::new()))
        .collect();
    for (subject, probed) in subjects.iter().zip(probed) {
        let Probed {
            options,
            took,
            quiet_after,
            findings,
        } = probed;
        let findings = findings?;
        let count = |grade| findings.iter().filter(|f| f.grade == grade).count();
        for finding in &findings {
            // A skip's reason is the cell: "skipped" alone says nothing.
            let said = match finding.grade {
                Grade::Skip => &finding.why,
                _ => &finding.measured,
            };
            let cell = format!("{}: {said}", finding.grade.label());
            out.write_sample(
                &format!("{}/{}", subject.name, finding.check),
                &Row {
                    server: subject.name,
                    check: finding.check,
                    grade: finding.grade,
                    measured: &finding.measured,
                    cell: cell.clone(),
                    value: finding.value.unwrap_or(-1.0),
                },
            )?;
            if let Some((_, cells)) = by_check.iter_mut().find(|(c, _)| c.name() == finding.check) {
                cells.push((subject.name, cell));
            }
        }
        out.write_summary(
            subject.name,
            &Tally {
                passed: count(Grade::Pass),
                warned: count(Grade::Warn),
                failed: count(Grade::Fail),
                skipped: count(Grade::Skip),
                took_s: took.as_secs_f64(),
                quiet_after_s: quiet_after.map(|waited| waited.as_secs_f64()),
                time_scale: if subject.compressed {
                    config.time_scale
                } else {
                    1.0
                },
                window_s: options.window.as_secs_f64(),
                balancer_idle_s: options.balancer_idle.as_secs_f64(),
                runtime: if subject.name == "node" {
                    format!("node {}", compare::version_of("node", &["--version"]).await)
                } else {
                    "rust".into()
                },
            },
        )?;
    }
    // One row a check, one column a server: the chapter's table.
    for (check, mut cells) in by_check {
        if !subjects.iter().any(|subject| subject.name == "node") {
            cells.push(("node", "not run: node is not installed".into()));
        }
        let row: serde_json::Map<String, serde_json::Value> = cells
            .into_iter()
            .map(|(server, cell)| (server.replace('-', "_"), cell.into()))
            .collect();
        out.write_summary(check.name(), &row)?;
    }
    Ok(())
}

/// Probes the servers at once, their load checks in turn, and returns what
/// each found in `subjects`' order.
async fn probe_all(config: &Config, subjects: &[Subject]) -> Result<Vec<Probed>> {
    // All at once, their load checks in turn. The last (Node, where it is
    // installed) takes the first turn: its window, in real seconds, is the
    // longest, and the Rust services' loads run while it waits.
    let mut turns = checks::Turn::in_order(subjects.len());
    turns.rotate_left(1);
    let ports = free_ports(subjects.len())?;
    let mut probing = tokio::task::JoinSet::new();
    for (index, ((subject, turn), port)) in
        subjects.iter().cloned().zip(turns).zip(ports).enumerate()
    {
        let options = config.options(subject.command_on(port), port, subject.compressed);
        eprintln!(
            "doctor: {} on 127.0.0.1:{port} (balancer idle {:.2} s, window {:.2} s)",
            subject.name,
            options.balancer_idle.as_secs_f64(),
            options.window.as_secs_f64()
        );
        probing.spawn(async move {
            let started = Instant::now();
            let progress = Indented {
                server: subject.name,
                quiet_after: std::sync::Mutex::new(None),
            };
            let findings = checks::run(&options, &progress, turn)
                .await
                .map(|ran| ran.findings)
                .with_context(|| format!("the doctor could not probe the {} server", subject.name));
            let quiet_after = progress.quiet_after.lock().ok().and_then(|waited| *waited);
            (
                index,
                Probed {
                    options,
                    took: started.elapsed(),
                    quiet_after,
                    findings,
                },
            )
        });
    }
    let mut probed: Vec<_> = probing.join_all().await;
    probed.sort_by_key(|(index, _)| *index);
    Ok(probed.into_iter().map(|(_, probed)| probed).collect())
}

/// The servers, in the report's order: the Rust services, then Node where it
/// is installed.
fn subjects(config: &Config) -> Result<Vec<Subject>> {
    let exe = std::env::current_exe().context("finding the lab's own binary")?;
    let exe = exe.to_string_lossy().into_owned();
    let mut subjects: Vec<Subject> = Service::ALL
        .iter()
        .map(|service| Subject {
            name: service.name(),
            command: vec![
                exe.clone(),
                "serve".into(),
                service.name().into(),
                "--scale".into(),
                config.time_scale.to_string(),
            ],
            compressed: true,
        })
        .collect();
    if node_available() {
        subjects.push(Subject {
            name: "node",
            command: vec!["node".into(), NODE_SERVER.into()],
            compressed: false,
        });
    } else {
        eprintln!("doctor: node is not installed; the Node server's column says so");
    }
    Ok(subjects)
}

/// `count` loopback ports that nothing listens on, all different: bound
/// together by the kernel's choice, then closed.
fn free_ports(count: usize) -> Result<Vec<u16>> {
    let held = (0..count)
        .map(|_| std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)))
        .collect::<std::io::Result<Vec<_>>>()
        .context("binding 127.0.0.1:0")?;
    held.iter()
        .map(|listener| Ok(listener.local_addr()?.port()))
        .collect()
}

/// `node --version` runs and succeeds.
pub fn node_available() -> bool {
    std::process::Command::new("node")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}
