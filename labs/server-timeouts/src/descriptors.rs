//! File descriptors: a server whose soft limit on open files is low, filled
//! by slow clients that each hold a connection, then one well-behaved
//! request. What does the server do once `accept` fails with `EMFILE`, is
//! the request served, and how does the server recover when the slow
//! clients go?
//!
//! The server runs in a process of its own ([`crate::fd_server`]), so the
//! lab can count its descriptors (`/proc/<pid>/fd`), its CPU time
//! (`/proc/<pid>/stat`) and what it writes to stderr, from outside.
//!
//! The schedule, the same for both servers:
//! 1. slow clients arrive one every `1 / slow_clients_per_s` production
//!    seconds, each sending half a request head, until the server holds as
//!    many descriptors as its limit allows;
//! 2. the probe, a complete `GET /`, connects (the kernel completes the
//!    handshake and queues it for `accept`) and waits for its answer;
//! 3. after `descriptor_hold_s` the slow clients close their connections;
//!    the probe waits on, at most a few real seconds more.

use std::{
    io::Read,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use lab_kit::child::{ChildGuard, cpu_ms};
use serde::Serialize;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    net::TcpStream,
};

use crate::{
    Config,
    fd_server::{FdServer, FdServerArgs},
    servers::Hardening,
    stalled_client::{RawConnection, get_request},
};

/// How long the probe may wait after the slow clients left: a real-time
/// bound (axum's retry is a constant second, not on the lab's clock).
const AFTER_RELEASE_BOUND: Duration = Duration::from_secs(3);

/// What one server did, the summary `descriptors/<server>`.
#[derive(Debug, Clone, Serialize)]
pub struct DescriptorExhaustion {
    pub server: String,
    /// The server's soft limit on open files, read back from
    /// `/proc/<pid>/limits`.
    pub limit: u64,
    /// Descriptors it held below the limit before the first client (stdio,
    /// the runtime's, the listener).
    pub baseline_fds: u64,
    /// Slow clients it accepted before it was full: the limit minus the
    /// baseline.
    pub slow_clients: u64,
    /// The server held `limit` descriptors at some point.
    pub became_full: bool,
    /// From the first slow client to the moment the server held `limit`
    /// descriptors (or the lab stopped waiting), lab ms and production
    /// seconds.
    pub full_after_ms: f64,
    pub full_after_production_s: f64,
    /// What happened to the probe, in words.
    pub probe_verdict: String,
    /// The probe was answered while the slow clients still held on.
    pub answered_while_held: bool,
    /// From the probe's request to its answer, lab ms (the lab's bound when
    /// it never came).
    pub probe_wait_ms: f64,
    /// The same at production scale, when it was answered while held.
    pub probe_wait_production_s: f64,
    /// When the slow clients closed, lab ms after the probe's request.
    pub released_at_ms: f64,
    /// From that close to the probe's answer, real ms (0 when it was
    /// answered before).
    pub after_release_ms: f64,
    /// Slow clients whose connection the server had closed by then.
    pub slow_closed_by_server: u64,
    /// CPU time the server used while full (probe sent to release), ms.
    pub cpu_ms_while_full: f64,
    /// Bytes the server wrote to stderr over the whole run: what an
    /// operator's logs would have shown.
    pub stderr_bytes: u64,
}

/// The descriptor limits of the lab's own process: the summary
/// `descriptors/lab-process`, so the chapter can say what this machine
/// gave a process started from its shell.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessLimits {
    pub soft_limit: u64,
    pub hard_limit: u64,
}

/// This process's `RLIMIT_NOFILE`.
pub fn own_limits() -> Result<ProcessLimits> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through a pointer to ours.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error()).context("reading RLIMIT_NOFILE");
    }
    Ok(ProcessLimits {
        soft_limit: limit.rlim_cur,
        hard_limit: limit.rlim_max,
    })
}

/// How many descriptors process `pid` holds numbered below `limit`: the
/// slots `accept` can use. (A descriptor inherited from the lab's own
/// parent may sit above the limit; it takes no slot.)
fn fds_below(pid: i32, limit: u64) -> Result<u64> {
    let entries = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .with_context(|| format!("reading /proc/{pid}/fd"))?;
    Ok(entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .filter(|fd| *fd < limit)
        .count() as u64)
}

/// The soft "Max open files" of process `pid`.
fn soft_open_files_limit(pid: i32) -> Result<u64> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .with_context(|| format!("reading /proc/{pid}/limits"))?;
    limits
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|soft| soft.parse().ok())
        .context("no Max open files in /proc/<pid>/limits")
}

/// The server process: started, its port read, its stderr counted.
struct ServerProcess {
    child: ChildGuard,
    port: u16,
    stderr: std::thread::JoinHandle<u64>,
}

async fn start(exe: &Path, args: &FdServerArgs) -> Result<ServerProcess> {
    let mut command = Command::new(exe);
    command
        .args(args.to_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = ChildGuard::spawn_command(command)
        .with_context(|| format!("starting {} {}", exe.display(), args.to_args()[0]))?;
    let mut stderr = child.take_stderr().context("the server has no stderr")?;
    let stderr = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        // Shown beside the lab's progress, as it would be in a log.
        if !text.is_empty() {
            eprint!("{}", String::from_utf8_lossy(&text));
        }
        text.len() as u64
    });
    let stdout = child.take_stdout().context("the server has no stdout")?;
    let stdout = tokio::process::ChildStdout::from_std(stdout)
        .context("reading the server's stdout asynchronously")?;
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
        .await
        .context("the server printed no port within 5 s")?
        .context("reading the server's port")?
        .context("the server ended before it printed its port")?;
    let port = line
        .trim()
        .parse()
        .with_context(|| format!("the server printed {line:?}, not a port"))?;
    Ok(ServerProcess {
        child,
        port,
        stderr,
    })
}

/// The server started with its low limit: its process, the soft limit it
/// got, and the descriptors it holds before any client (an error when that
/// leaves no room for a slow client and the probe).
async fn start_with_limit(
    config: &Config,
    server: FdServer,
    hardening: Hardening,
) -> Result<(ServerProcess, u64, u64)> {
    let args = FdServerArgs {
        server,
        open_files: config.descriptor_limit,
        hardening,
    };
    let process = start(&config.fd_server_exe, &args).await?;
    let pid = process.child.pid();
    let limit = soft_open_files_limit(pid)?;
    let baseline_fds = fds_below(pid, limit)?;
    if baseline_fds + 2 > limit {
        bail!("the server holds {baseline_fds} descriptors of its {limit} before any client");
    }
    Ok((process, limit, baseline_fds))
}

/// One server through the schedule.
pub async fn fill_one(
    config: &Config,
    server: FdServer,
    hardening: Hardening,
) -> Result<DescriptorExhaustion> {
    let (mut process, limit, baseline_fds) = start_with_limit(config, server, hardening).await?;
    let pid = process.child.pid();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], process.port));
    // 1. Slow clients, one every interval, until the server is full.
    let slow_clients = limit - baseline_fds;
    let interval = config.lab(1.0 / config.slow_clients_per_s);
    let first = Instant::now();
    let mut slow = Vec::new();
    for index in 0..slow_clients {
        tokio::time::sleep_until((first + interval * index as u32).into()).await;
        let mut connection = TcpStream::connect(addr)
            .await
            .with_context(|| format!("slow client {index} connecting"))?;
        use tokio::io::AsyncWriteExt;
        connection
            .write_all(b"GET / HTTP/1.1\r\nHost: lab\r\n")
            .await
            .with_context(|| format!("slow client {index} sending half a head"))?;
        slow.push(connection);
    }
    // A server that closes slow clients sooner than they fill it (a limit
    // raised with `--set`) is never full: then the probe comes 3 s after
    // the last slow client, and the row says so.
    let full_by = Instant::now() + Duration::from_secs(3);
    let mut became_full = true;
    while fds_below(pid, limit)? < limit {
        if Instant::now() > full_by {
            became_full = false;
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let full_after = first.elapsed();
    // 2. The probe.
    let hold = config.lab(config.descriptor_hold_s);
    let cpu_before = cpu_ms(pid)?;
    let sent = Instant::now();
    let mut probe = RawConnection::connect(addr, Duration::from_secs(2)).await?;
    probe
        .send(&get_request("/", "lab"))
        .await
        .map_err(|end| anyhow::anyhow!("sending the probe: {end:?}"))?;
    let answer = tokio::spawn(async move {
        let answer = tokio::time::timeout(hold + AFTER_RELEASE_BOUND, probe.read_answer()).await;
        (answer, Instant::now())
    });
    // 3. The release.
    tokio::time::sleep_until((sent + hold).into()).await;
    let cpu_ms_while_full = cpu_ms(pid)? - cpu_before;
    let slow_closed_by_server = closed_by_server(&slow);
    let released = Instant::now();
    drop(slow);
    let (answer, answered_at) = answer.await.context("the probe's task")?;
    let status = match answer {
        Ok(Ok(answer)) => Some(answer.status),
        Ok(Err(end)) => bail!("{}: the probe's connection ended: {end:?}", server.name()),
        Err(_) => None,
    };
    let answered_while_held = status.is_some() && answered_at < released;
    let probe_wait = answered_at - sent;
    let after_release = answered_at.saturating_duration_since(released);
    let probe_verdict = verdict(status, answered_while_held);
    process.child.kill_group()?;
    let stderr_bytes = process.stderr.join().unwrap_or_default();
    let lab_ms = |duration: Duration| duration.as_secs_f64() * 1000.0;
    Ok(DescriptorExhaustion {
        server: server.name().into(),
        limit,
        baseline_fds,
        slow_clients,
        became_full,
        full_after_ms: lab_ms(full_after),
        full_after_production_s: config.production_s(lab_ms(full_after)),
        probe_verdict,
        answered_while_held,
        probe_wait_ms: lab_ms(probe_wait),
        probe_wait_production_s: if answered_while_held {
            config.production_s(lab_ms(probe_wait))
        } else {
            config.descriptor_hold_s
        },
        released_at_ms: lab_ms(released - sent),
        after_release_ms: lab_ms(after_release),
        slow_closed_by_server,
        cpu_ms_while_full,
        stderr_bytes,
    })
}

/// Slow clients whose connection the server has closed: a read that finds
/// the end of the stream or an error other than "nothing yet".
fn closed_by_server(slow: &[TcpStream]) -> u64 {
    let mut slow_closed_by_server = 0;
    let mut buffer = [0u8; 64];
    for connection in slow {
        match connection.try_read(&mut buffer) {
            Ok(0) => slow_closed_by_server += 1,
            Err(error) if error.kind() != std::io::ErrorKind::WouldBlock => {
                slow_closed_by_server += 1
            }
            _ => {}
        }
    }
    slow_closed_by_server
}

/// What happened to the probe, in words.
fn verdict(status: Option<u16>, answered_while_held: bool) -> String {
    match (status, answered_while_held) {
        (None, _) => "no answer".to_string(),
        (Some(code), true) => format!("answered {code} while the slow clients held on"),
        (Some(code), false) => format!("answered {code} after the slow clients left"),
    }
}

/// Both servers at once, and the lab process's own limits.
pub async fn descriptors(
    config: &Config,
) -> Result<(ProcessLimits, Vec<(FdServer, DescriptorExhaustion)>)> {
    let hardening = Hardening {
        header_read_timeout: config.lab(config.hardened_header_read_s),
        request_body_timeout: config.lab(config.body_timeout_s),
        handler_deadline: config.lab(config.handler_deadline_s),
    };
    let (axum, hardened) = tokio::join!(
        fill_one(config, FdServer::AxumServe, hardening),
        fill_one(config, FdServer::Hardened, hardening),
    );
    Ok((
        own_limits()?,
        vec![
            (FdServer::AxumServe, axum.context("axum::serve")?),
            (FdServer::Hardened, hardened.context("the hardened server")?),
        ],
    ))
}

/// The running binary: the lab's, which re-executes itself as the server
/// (a test sets the lab binary's path instead).
pub fn this_binary() -> PathBuf {
    std::env::current_exe().unwrap_or_default()
}
