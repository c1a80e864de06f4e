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
    // Kept until every probe has ended: the servers serve files from it.
    let dir = tempfile::tempdir().context("a folder for the servers' files")?;
    let www = dir.path().join("www");
    std::fs::create_dir_all(&www).context("creating www")?;
    std::fs::write(www.join("index.html"), "ok\n").context("writing index.html")?;
    std::fs::write(www.join("big"), vec![b'x'; 256 * 1024]).context("writing big")?;
    let mut probing = tokio::task::JoinSet::new();
    for (index, server) in SERVERS.iter().enumerate() {
        // The program each server needs, found once: absent, it is a row
        // that says so (the hardened service is this binary).
        let program = match server.program {
            "" => None,
            name => match find(name) {
                Some(path) => Some(path.display().to_string()),
                None => {
                    eprintln!("doctor: servers in the wild: {name} is not installed");
                    let why = format!("{name} is not installed");
                    probing.spawn(async move { (index, Row::not_run(server.name.into(), &why)) });
                    continue;
                }
            },
        };
        let options = options_for(server, program, (window_s, grace_s), dir.path());
        probing.spawn(async move {
            let name = match server.program {
                "" => "hardened (the book's, real clock)".to_string(),
                program => format!(
                    "{} {}",
                    server.name,
                    version_of(program, server.version).await
                ),
            };
            let found = match options {
                Ok(options) => checks::run(&options, &Quiet, checks::Turn::alone()).await,
                Err(error) => Err(error),
            };
            let row = match found {
                Ok(ran) => Row::from(name, &ran.findings),
                Err(error) => Row::not_run(name, &format!("{error:#}")),
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

/// The command that starts `server` on `port`, its files in `dir`:
/// `program` is where its program is, `None` for the hardened service
/// (this binary's `serve hardened`).
fn command(server: &Server, program: Option<String>, port: u16, dir: &Path) -> Result<Vec<String>> {
    let www = dir.join("www");
    let Some(program) = program else {
        let exe = std::env::current_exe().context("finding the lab's own binary")?;
        let exe = exe.display().to_string();
        return Ok(vec![
            exe,
            "serve".into(),
            "hardened".into(),
            "--port".into(),
            port.to_string(),
        ]);
    };
    Ok(match server.name {
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
        "python" => {
            let www = www.display().to_string();
            let words = [
                "-m",
                "http.server",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ];
            let mut command = vec![program];
            command.extend(words.map(String::from));
            command.extend(["--directory".into(), www]);
            command
        }
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
    })
}

/// The doctor's options for `server` on a port of its own, its files in
/// `dir`.
fn options_for(
    server: &Server,
    program: Option<String>,
    (window_s, grace_s): (f64, f64),
    dir: &Path,
) -> Result<Options> {
    let port = lab_kit::net::free_loopback_port()?;
    let command = command(server, program, port, dir)?;
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
    crate::options::parse(&args)
}
