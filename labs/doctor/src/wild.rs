//! Servers in the wild: the doctor against the servers this machine has,
//! each with its timeouts at their defaults (nginx, Python's `http.server`,
//! HAProxy, Node) and the book's hardened service on the real clock, each
//! started by the doctor (`--port P -- COMMAND`) so that its shutdown is
//! measured too. Only the checks that watch a connection and the shutdown:
//! none of these has a heavy or a limited route. A server that is not
//! installed is a row that says so, after one line on stderr.
//!
//! The window is the lab's real-time one (Node's: 12 s quick, 100 s full):
//! defaults longer than that (nginx's 60 s and 75 s) read "still open" in a
//! quick run, and the chapter says so.

use std::{path::Path, time::Duration};

use anyhow::{Context, Result};
use lab_kit::nginx::{find, nginx_config, version_of};
use serde::Serialize;

use crate::{
    checks::{self, Progress},
    finding::{Check, Finding, Grade},
    options::Options,
    services::NODE_SERVER,
};

/// The checks each server gets: none needs a route the server lacks.
const CHECKS: [Check; 5] = [
    Check::IdleKeepAlive,
    Check::SlowHead,
    Check::SlowBody,
    Check::SlowRead,
    Check::Shutdown,
];

/// A server of the table: its name, the program that must be installed,
/// how to ask its version, whether it serves the 256 KiB `/big`, and
/// whether it has a route that reads a body (`/upload`).
struct Server {
    name: &'static str,
    program: &'static str,
    version: &'static [&'static str],
    big: bool,
    upload: bool,
}

#[rustfmt::skip]
const SERVERS: [Server; 5] = [
    Server { name: "nginx", program: "nginx", version: &["-v"], big: true, upload: false },
    Server { name: "python", program: "python3", version: &["--version"], big: true, upload: false },
    Server { name: "haproxy", program: "haproxy", version: &["-v"], big: false, upload: false },
    Server { name: "node", program: "node", version: &["--version"], big: true, upload: true },
    Server { name: "hardened", program: "", version: &[], big: true, upload: true },
];

/// One row of the chapter's table: the server and version, a cell per
/// check, and the number behind each (-1 where there is none).
#[derive(Debug, Serialize)]
struct Row {
    server: String,
    idle_keepalive: String,
    slow_head: String,
    slow_body: String,
    slow_read: String,
    shutdown: String,
    idle_keepalive_s: f64,
    slow_head_s: f64,
    shutdown_s: f64,
    /// 1 where SIGTERM killed the server (no handler), 0 where it exited
    /// on its own, -1 where the check did not run.
    died_of_sigterm: f64,
}

impl Row {
    fn not_run(server: String, why: &str) -> Row {
        let cell = || format!("not run: {why}");
        Row {
            server,
            idle_keepalive: cell(),
            slow_head: cell(),
            slow_body: cell(),
            slow_read: cell(),
            shutdown: cell(),
            idle_keepalive_s: -1.0,
            slow_head_s: -1.0,
            shutdown_s: -1.0,
            died_of_sigterm: -1.0,
        }
    }

    fn from(server: String, findings: &[Finding]) -> Row {
        let of = |check: Check| {
            findings
                .iter()
                .find(|finding| finding.check == check.name())
        };
        let cell = |check: Check| match of(check) {
            Some(finding) if finding.grade == Grade::Skip => format!("skip: {}", finding.why),
            Some(finding) => format!("{}: {}", finding.grade.label(), finding.measured),
            None => "not run (no large answer to read)".to_string(),
        };
        let value = |check: Check| of(check).and_then(|finding| finding.value).unwrap_or(-1.0);
        let died = match of(Check::Shutdown) {
            Some(finding) if finding.measured.starts_with("exit signal 15") => 1.0,
            Some(finding) if finding.measured.starts_with("exit ") => 0.0,
            _ => -1.0,
        };
        Row {
            server,
            idle_keepalive: cell(Check::IdleKeepAlive),
            slow_head: cell(Check::SlowHead),
            slow_body: cell(Check::SlowBody),
            slow_read: cell(Check::SlowRead),
            shutdown: cell(Check::Shutdown),
            idle_keepalive_s: value(Check::IdleKeepAlive),
            slow_head_s: value(Check::SlowHead),
            shutdown_s: value(Check::Shutdown),
            died_of_sigterm: died,
        }
    }
}

/// No progress lines of its own: the rows say it all.
struct Quiet;

impl Progress for Quiet {
    fn started(&self, _checks: &[Check], _bound: Duration) {}
    fn finished(&self, _finding: &Finding, _done: usize, _of: usize) {}
}

/// Probes every server at once, watching for `window_s` and giving each
/// shutdown `grace_s` (the lab's real-time window and grace); their rows,
/// in [`SERVERS`]' order, as (series, row).
pub async fn run(window_s: f64, grace_s: f64) -> Result<Vec<(String, impl Serialize)>> {
    let dir = tempfile::tempdir().context("a folder for the servers' files")?;
    let www = dir.path().join("www");
    std::fs::create_dir_all(&www).context("creating www")?;
    std::fs::write(www.join("index.html"), "ok\n").context("writing index.html")?;
    std::fs::write(www.join("big"), vec![b'x'; 256 * 1024]).context("writing big")?;
    let mut probing = tokio::task::JoinSet::new();
    for (index, server) in SERVERS.iter().enumerate() {
        let started = match prepare(server, (window_s, grace_s), dir.path()) {
            Ok(Some(options)) => options,
            Ok(None) => continue,
            Err(error) => {
                eprintln!("doctor: servers in the wild: {}: {error:#}", server.name);
                continue;
            }
        };
        probing.spawn(async move {
            let findings = checks::run(&started, &Quiet, checks::Turn::alone()).await;
            (index, findings.map(|ran| ran.findings))
        });
    }
    let mut found: Vec<_> = probing.join_all().await;
    found.sort_by_key(|(index, _)| *index);
    let mut rows = Vec::new();
    for (index, server) in SERVERS.iter().enumerate() {
        let name = match server.program {
            "" => "hardened (the book's, real clock)".to_string(),
            program => match find(program) {
                Some(_) => format!(
                    "{} {}",
                    server.name,
                    version_of(program, server.version).await
                ),
                None => {
                    rows.push(Row::not_run(
                        server.name.into(),
                        &format!("{program} is not installed"),
                    ));
                    continue;
                }
            },
        };
        let row = match found.iter().find(|(at, _)| *at == index) {
            Some((_, Ok(findings))) => Row::from(name, findings),
            Some((_, Err(error))) => Row::not_run(name, &format!("{error:#}")),
            None => Row::not_run(name, "it could not be started"),
        };
        rows.push(row);
    }
    drop(dir);
    Ok(SERVERS
        .iter()
        .zip(rows)
        .map(|(server, row)| (format!("wild/{}", server.name), row))
        .collect())
}

/// The doctor's options for `server` on a port of its own, its files in
/// `dir`; `None`, after one line, where its program is not installed.
fn prepare(
    server: &Server,
    (window_s, grace_s): (f64, f64),
    dir: &Path,
) -> Result<Option<Options>> {
    let port = lab_kit::net::free_loopback_port()?;
    let www = dir.join("www");
    let command: Vec<String> = match server.name {
        "nginx" | "python" | "haproxy" | "node" => {
            let Some(program) = find(server.program) else {
                eprintln!(
                    "doctor: servers in the wild: {} is not installed",
                    server.program
                );
                return Ok(None);
            };
            let program = program.display().to_string();
            match server.name {
                "nginx" => {
                    let block = format!(
                        "server {{\n  listen 127.0.0.1:{port};\n  root {};\n}}\n",
                        www.display()
                    );
                    let conf = dir.join("nginx.conf");
                    std::fs::write(&conf, nginx_config(dir, &block))?;
                    let (conf, prefix) = (conf.display().to_string(), dir.display().to_string());
                    vec![program, "-c".into(), conf, "-p".into(), prefix]
                }
                "python" => vec![
                    program,
                    "-m".into(),
                    "http.server".into(),
                    port.to_string(),
                    "--bind".into(),
                    "127.0.0.1".into(),
                    "--directory".into(),
                    www.display().to_string(),
                ],
                "haproxy" => {
                    let conf = dir.join("haproxy.cfg");
                    let text = format!(
                        "defaults\n  mode http\nfrontend doctor\n  bind 127.0.0.1:{port}\n  \
                         http-request return status 200 content-type text/plain string \"ok\"\n"
                    );
                    std::fs::write(&conf, text)?;
                    vec![
                        program,
                        "-f".into(),
                        conf.display().to_string(),
                        "-db".into(),
                    ]
                }
                _ => vec![program, NODE_SERVER.into(), port.to_string()],
            }
        }
        _ => {
            let exe = std::env::current_exe().context("finding the lab's own binary")?;
            let exe = exe.display().to_string();
            vec![
                exe,
                "serve".into(),
                "hardened".into(),
                "--port".into(),
                port.to_string(),
            ]
        }
    };
    let window = format!("{}ms", (window_s * 1000.0) as u64);
    let mut args = vec![
        "--port".to_string(),
        port.to_string(),
        "--window".into(),
        window,
        "--grace".into(),
        format!("{}ms", (grace_s * 1000.0) as u64),
    ];
    if server.big {
        args.extend(["--read-path".to_string(), "/big".to_string()]);
    }
    if server.upload {
        args.extend(["--body-path".to_string(), "/upload".to_string()]);
    }
    // A slow read needs an answer larger than the socket buffers: without
    // one it would pipeline a million requests to find none.
    let checks = CHECKS
        .into_iter()
        .filter(|check| server.big || *check != Check::SlowRead);
    args.extend(checks.map(|check| check.name().to_string()));
    args.push("--".into());
    args.extend(command);
    Ok(Some(crate::options::parse(&args)?))
}
