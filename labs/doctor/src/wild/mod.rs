//! Servers in the wild: the doctor against the servers this machine has,
//! each with its timeouts at their defaults (nginx, Python's `http.server`,
//! HAProxy, Apache httpd, Caddy, gunicorn, uvicorn, Java's `jwebserver`,
//! Node) and the book's
//! hardened service on the real clock, each
//! started by the doctor (`--port P -- COMMAND`) so that its shutdown is
//! measured too. Only the checks that watch a connection and the shutdown:
//! none of these has a heavy or a limited route. A server that is not
//! installed is a row that says so, after one line on stderr.
//!
//! The window is the lab's real-time one (Node's: 12 s quick, 100 s full):
//! defaults longer than that (nginx's 60 s and 75 s) read "still open" in a
//! quick run, and the chapter says so.

mod command;

use std::{os::unix::fs::PermissionsExt, path::Path, time::Duration};

use anyhow::{Context, Result};
use lab_kit::nginx::{find, version_of};
use serde::Serialize;

use crate::{
    checks::{self, Progress},
    finding::{Check, Finding, Grade},
    options::Options,
};

/// The checks each server gets: none needs a route the server lacks.
const CHECKS: [Check; 5] = [
    Check::IdleKeepAlive,
    Check::SlowHead,
    Check::SlowBody,
    Check::SlowRead,
    Check::Shutdown,
];

/// A server of the table: its name, the programs that may start it (the
/// first installed one does), how to ask its version, whether it serves the
/// 256 KiB `/big`, and whether it has a route that reads a body (`/upload`).
struct Server {
    name: &'static str,
    programs: &'static [&'static str],
    version: &'static [&'static str],
    big: bool,
    upload: bool,
}

#[rustfmt::skip]
const SERVERS: [Server; 10] = [
    Server { name: "nginx", programs: &["nginx"], version: &["-v"], big: true, upload: false },
    Server { name: "python", programs: &["python3"], version: &["--version"], big: true, upload: false },
    Server { name: "haproxy", programs: &["haproxy"], version: &["-v"], big: false, upload: false },
    Server { name: "apache", programs: &["apache2", "httpd"], version: &["-v"], big: true, upload: false },
    Server { name: "caddy", programs: &["caddy"], version: &["version"], big: true, upload: false },
    Server { name: "gunicorn", programs: &["gunicorn"], version: &["--version"], big: true, upload: true },
    Server { name: "uvicorn", programs: &["uvicorn"], version: &["--version"], big: true, upload: true },
    Server { name: "java", programs: &["jwebserver"], version: &["--version"], big: true, upload: false },
    Server { name: "node", programs: &["node"], version: &["--version"], big: true, upload: true },
    Server { name: "hardened", programs: &[], version: &[], big: true, upload: true },
];

/// One row of the chapter's table: the server and version, a cell per
/// check, and the number behind each (-1 where there is none).
#[derive(Debug, Serialize)]
pub struct Row {
    server: String,
    idle_keepalive: String,
    slow_head: String,
    slow_body: String,
    slow_read: String,
    shutdown: String,
    idle_keepalive_s: f64,
    slow_head_s: f64,
    slow_body_s: f64,
    slow_read_s: f64,
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
            slow_body_s: -1.0,
            slow_read_s: -1.0,
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
            slow_body_s: value(Check::SlowBody),
            slow_read_s: value(Check::SlowRead),
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
pub async fn run(window_s: f64, grace_s: f64) -> Result<Vec<(String, Row)>> {
    let lab = std::env::current_exe().context("finding the lab's own binary")?;
    run_finding(window_s, grace_s, find, &lab).await
}

/// [`run`], with `locate` saying where each program is (`find`: on the
/// PATH or in /usr/sbin; a test passes one that finds nothing) and `lab`
/// the lab's binary, whose `serve hardened` is the hardened service.
pub async fn run_finding(
    window_s: f64,
    grace_s: f64,
    locate: impl Fn(&str) -> Option<std::path::PathBuf>,
    lab: &Path,
) -> Result<Vec<(String, Row)>> {
    // Kept until every probe has ended: the servers serve files from it.
    let dir = tempfile::tempdir().context("a folder for the servers' files")?;
    let www = dir.path().join("www");
    std::fs::create_dir_all(&www).context("creating www")?;
    // Readable by all: a server started as root (Apache) serves as nobody.
    for readable in [dir.path(), &www] {
        std::fs::set_permissions(readable, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("opening {} to its servers", readable.display()))?;
    }
    std::fs::write(www.join("index.html"), "ok\n").context("writing index.html")?;
    std::fs::write(www.join("big"), vec![b'x'; 256 * 1024]).context("writing big")?;
    let mut probing = tokio::task::JoinSet::new();
    for (index, server) in SERVERS.iter().enumerate() {
        // The program each server needs, found once: absent, it is a row
        // that says so (the hardened service is the lab's binary).
        let program = match server.programs {
            [] => lab.display().to_string(),
            names => match names.iter().find_map(|name| locate(name)) {
                Some(path) => path.display().to_string(),
                None => {
                    let why = format!("{} is not installed", names.join(" or "));
                    eprintln!("doctor: servers in the wild: {why}");
                    probing.spawn(async move { (index, Row::not_run(server.name.into(), &why)) });
                    continue;
                }
            },
        };
        let options = options_for(server, program.clone(), (window_s, grace_s), dir.path());
        let log = log_of(dir.path(), server);
        probing.spawn(async move {
            let name = match server.programs {
                [] => "hardened (the book's, real clock)".to_string(),
                _ => format!(
                    "{} {}",
                    server.name,
                    version_of(&program, server.version).await
                ),
            };
            let found = match options {
                Ok(options) => checks::run(&options, &Quiet, checks::Turn::alone()).await,
                Err(error) => Err(error),
            };
            let row = match found {
                Ok(ran) => Row::from(name, &ran.findings),
                Err(error) => Row::not_run(name, &not_run_because(&error, &log)),
            };
            (index, row)
        });
    }
    let mut rows: Vec<(usize, Row)> = probing.join_all().await;
    rows.sort_by_key(|(index, _)| *index);
    drop(dir);
    Ok(rows
        .into_iter()
        .map(|(index, row)| (format!("wild/{}", SERVERS[index].name), row))
        .collect())
}

/// The doctor's options for `server` on a port of its own, its files in
/// `dir`.
fn options_for(
    server: &Server,
    program: String,
    (window_s, grace_s): (f64, f64),
    dir: &Path,
) -> Result<Options> {
    let port = lab_kit::net::free_loopback_port()?;
    // What the server writes to stderr goes to a log of its own in `dir`,
    // not among the lab's progress lines (`exec` keeps its pid, so the
    // shutdown check signals the server itself); a server that would not
    // start is explained by the log's last line.
    let mut command_line = strings([
        "/bin/sh",
        "-c",
        r#"log=$1; shift; exec "$@" 2>>"$log""#,
        "sh",
    ]);
    command_line.push(log_of(dir, server).display().to_string());
    command_line.extend(command::command(server, program, port, dir)?);
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
    args.extend(command_line);
    crate::options::parse(&args)
}

/// Where `server`'s stderr goes.
fn log_of(dir: &Path, server: &Server) -> std::path::PathBuf {
    dir.join(format!("{}.stderr", server.name))
}

/// Why a server was not measured: the doctor's error, and the last line the
/// server wrote to stderr, if it wrote one.
fn not_run_because(error: &anyhow::Error, log: &Path) -> String {
    let said = std::fs::read_to_string(log).unwrap_or_default();
    match said.lines().rev().find(|line| !line.trim().is_empty()) {
        Some(line) => format!("{error:#}; it said: {}", line.trim()),
        None => format!("{error:#}"),
    }
}

fn strings<const N: usize>(words: [&str; N]) -> Vec<String> {
    words.map(String::from).to_vec()
}
