//! PID 1 and signals: does the orchestrator's SIGTERM reach the server? The
//! same server started the ways containers start it: as PID 1 of a new PID
//! namespace ([`crate::init`]'s `__pid1`, where the kernel allows one), behind
//! `sh -c "server"` or `sh -c "exec server"`, behind a tini-style init; and
//! as an ordinary process for contrast. The orchestrator signals what a
//! runtime signals, the namespace's PID 1 (or the process it started), and
//! SIGKILLs it when the grace period runs out.

use std::{process::Stdio, time::Duration};

use anyhow::{Context, Result, bail};
use lab_kit::{Series, child::ChildGuard, clock::monotonic_ms};
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::{
    Config,
    deploy::{ServerFiles, wait_for_port_file},
    events::{first, read_events},
    init::NAMESPACE_REFUSED,
};

lab_kit::series! {
    /// How the server is started, and so who receives SIGTERM.
    pub enum Start in "pid1" {
        /// An ordinary process with no SIGTERM handler: the default action.
        PlainNoHandler => "plain-no-handler",
        /// An ordinary `sh -c "server"`: the shell gets SIGTERM.
        PlainShell => "plain-sh-c",
        /// PID 1 of a namespace, no SIGTERM handler.
        NoHandler => "no-handler",
        /// PID 1 of a namespace, with the full sequence's handler.
        Handler => "handler",
        /// `sh -c "server"` as PID 1: the shell is PID 1.
        Shell => "sh-c",
        /// `sh -c "exec server"` as PID 1: the shell becomes the server.
        ShellExec => "sh-c-exec",
        /// The lab's tini-style init as PID 1, the server without a handler.
        InitNoHandler => "init-no-handler",
        /// The init as PID 1, the server with its handler.
        InitHandler => "init-handler",
    }
}

impl Start {
    /// Whether it needs a PID namespace.
    pub fn in_namespace(self) -> bool {
        !matches!(self, Start::PlainNoHandler | Start::PlainShell)
    }

    /// Whether the server installs a SIGTERM handler (the full sequence).
    pub fn server_handles_sigterm(self) -> bool {
        !matches!(
            self,
            Start::PlainNoHandler | Start::NoHandler | Start::InitNoHandler
        )
    }
}

/// How one start ended.
#[derive(Debug, Clone, Serialize)]
pub struct PidOneSummary {
    /// "pid", "user+pid" (a non-root user's way in), or "none".
    pub namespace: String,
    /// The server's own pid as it saw it: 1 when it was PID 1.
    pub server_pid_inside: f64,
    pub server_has_handler: bool,
    /// The server received SIGTERM: its handler logged it, or (without a
    /// handler) it died of it.
    pub server_got_sigterm: bool,
    /// The exit code of what the orchestrator signalled, as a shell and
    /// `kubectl describe pod` report it.
    pub exit_code: i64,
    pub time_to_exit_ms: f64,
    pub killed_at_grace: bool,
    /// The server's own log: it drained and closed its database.
    pub drained: bool,
    /// A process of the group was still running after the signalled one had
    /// ended: the server, orphaned.
    pub left_running: bool,
}

/// Whether this machine lets the lab start a PID namespace (asking the same
/// helper the starts use): `None` if it does, else the kernel's reason.
pub async fn namespace_refused(config: &Config) -> Result<Option<String>> {
    let mut command = std::process::Command::new(&config.server_exe);
    command
        .args(["__pid1", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut helper = ChildGuard::spawn_command(command).context("starting the namespace helper")?;
    let ended = helper
        .wait_for(Duration::from_secs(5))
        .await?
        .context("the namespace helper did not end within 5 s")?;
    if ended.shell_code() != NAMESPACE_REFUSED {
        return Ok(None);
    }
    let mut reason = String::new();
    if let Some(mut stderr) = helper.take_stderr() {
        std::io::Read::read_to_string(&mut stderr, &mut reason).context("reading the helper")?;
    }
    Ok(Some(reason.trim().to_string()))
}

/// Whether this machine lets the lab start a PID namespace.
pub async fn namespaces_allowed(config: &Config) -> Result<bool> {
    Ok(namespace_refused(config).await?.is_none())
}

/// `'text'` for `sh -c`, with any `'` inside written as `'\''`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The command line of one start, program first.
fn command_line(start: Start, config: &Config, files: &ServerFiles) -> Vec<String> {
    let exe = config.server_exe.display().to_string();
    let style = if start.server_handles_sigterm() {
        "full"
    } else {
        "exit-at-once"
    };
    let mut server = vec![
        exe.clone(),
        "__server".into(),
        "--style".into(),
        style.into(),
    ];
    for (flag, path) in [
        ("--db", &files.db),
        ("--port-file", &files.port),
        ("--events", &files.events),
    ] {
        server.extend([flag.to_string(), path.display().to_string()]);
    }
    server.extend(config.server_timing_args());
    let line: Vec<String> = server.iter().map(|word| shell_quote(word)).collect();
    let shell = |prefix: &str| {
        vec![
            "/bin/sh".to_string(),
            "-c".into(),
            format!("{prefix}{}", line.join(" ")),
        ]
    };
    let init = |server: Vec<String>| [vec![exe.clone(), "__init".into()], server].concat();
    let entry = match start {
        Start::PlainNoHandler | Start::NoHandler | Start::Handler => server,
        Start::PlainShell | Start::Shell => shell(""),
        Start::ShellExec => shell("exec "),
        Start::InitNoHandler | Start::InitHandler => init(server),
    };
    if start.in_namespace() {
        [vec![exe, "__pid1".into()], entry].concat()
    } else {
        entry
    }
}

/// Starts the server one way, waits until it listens, plays orchestrator.
pub async fn run_start(start: Start, config: &Config) -> Result<PidOneSummary> {
    let scratch = tempfile::tempdir().context("creating a temp dir")?;
    let files = ServerFiles::in_dir(scratch.path());
    let line = command_line(start, config, &files);
    let stdout = if start.in_namespace() {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    let mut child = ChildGuard::spawn(&line[0], &line[1..], stdout)
        .with_context(|| format!("starting {}", line[0]))?;
    let (target, namespace) = if start.in_namespace() {
        pid_one_of(&mut child).await?
    } else {
        (child.pid(), "none".to_string())
    };
    wait_for_port_file(&files.port, &mut child, Duration::from_secs(10)).await?;

    // ANCHOR: signal_pid_one
    // SIGTERM to what the runtime started; SIGKILL when the grace runs out.
    signal(target, libc::SIGTERM)?;
    let sigterm_at = monotonic_ms();
    let grace = Duration::from_millis(config.termination_grace_ms);
    let (ended, killed_at_grace) = match child.wait_for(grace).await? {
        Some(ended) => (ended, false),
        None => {
            signal(target, libc::SIGKILL)?;
            let ended = child.wait_for(Duration::from_secs(5)).await?;
            (ended.context("still there 5 s after SIGKILL")?, true)
        }
    };
    // ANCHOR_END: signal_pid_one
    let exit_at = monotonic_ms();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let left_running = group_alive(child.pid());
    drop(child);
    let events = read_events(&files.events)?;
    let handled = first(&events, "sigterm").is_some();
    let exit_code = i64::from(ended.shell_code());
    Ok(PidOneSummary {
        namespace,
        server_pid_inside: first(&events, "pid").map_or(-1.0, |event| event.value),
        server_has_handler: start.server_handles_sigterm(),
        server_got_sigterm: if start.server_handles_sigterm() {
            handled
        } else {
            // No shell in between: the exit code is the server's own.
            exit_code == 128 + i64::from(libc::SIGTERM)
        },
        exit_code,
        time_to_exit_ms: exit_at - sigterm_at,
        killed_at_grace,
        drained: first(&events, "db_closed").is_some(),
        left_running,
    })
}

/// Reads the helper's line: the pid of the namespace's PID 1, out here.
async fn pid_one_of(helper: &mut ChildGuard) -> Result<(i32, String)> {
    let stdout = helper.take_stdout().context("the helper's stdout")?;
    let stdout = tokio::process::ChildStdout::from_std(stdout).context("reading the helper")?;
    let mut line = String::new();
    let mut reader = BufReader::new(stdout);
    tokio::time::timeout(Duration::from_secs(10), reader.read_line(&mut line))
        .await
        .context("the namespace helper said nothing within 10 s")?
        .context("reading the namespace helper")?;
    let Some((pid, namespace)) = line.trim().split_once(' ') else {
        bail!("the namespace helper said {line:?}");
    };
    let pid = pid.parse().with_context(|| format!("a pid: {pid:?}"))?;
    Ok((pid, namespace.to_string()))
}

fn signal(pid: i32, signal: i32) -> Result<()> {
    // The pid is our child's or its child's, not reaped while we signal it.
    if let Err(error) = lab_kit::process::signal(pid, signal) {
        // Gone already: the race the orchestrator always has.
        if error.raw_os_error() != Some(libc::ESRCH) {
            return Err(error).with_context(|| format!("signal {signal} to pid {pid}"));
        }
    }
    Ok(())
}

/// Some process of the group `pgid` is still running (a zombie waiting to
/// be reaped does not count): read from `/proc/<pid>/stat`, whose third
/// field is the state and fifth the process group.
fn group_alive(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // The command name (field 2) is in parentheses and may hold spaces.
        let Some((_, after_name)) = stat.rsplit_once(") ") else {
            return false;
        };
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string()
    })
}

/// Every start the machine allows, side by side, in [`Start::ALL`]'s order;
/// the namespace starts skipped with one line where the kernel refuses one.
pub async fn pid_one(config: &Config) -> Result<Vec<(Start, PidOneSummary)>> {
    let refused = namespace_refused(config).await?;
    if let Some(reason) = &refused {
        eprintln!("shutdown-drain: PID 1 starts skipped: {reason}");
    }
    let allowed = refused.is_none();
    let starts = Start::ALL
        .into_iter()
        .filter(|start| allowed || !start.in_namespace());
    let config = config.clone();
    lab_kit::concurrently::run_all(
        starts,
        |start| start.series(),
        move |start| {
            let config = config.clone();
            async move { run_start(start, &config).await }
        },
    )
    .await
}
