//! The external prober: a separate process that asks the server for /health
//! every few milliseconds and prints one JSON line per answer.
//!
//! It is a process of its own so that nothing the server does to its threads
//! can delay the measurement: a prober on the server's runtime would be stuck
//! behind the very report it is supposed to catch. The lab binary re-executes
//! itself with the hidden subcommand `__prober`; the parent reads the lines.

use std::{
    io::{BufRead, Write},
    net::SocketAddr,
    path::Path,
    process::{ChildStdin, Command, ExitCode, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use lab_kit::{
    child::{ChildGuard, Ended},
    clock::monotonic_ms,
    flags::Flags,
};
use serde::{Deserialize, Serialize};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    sync::oneshot,
    task::{JoinHandle, JoinSet},
    time::MissedTickBehavior,
};

/// The hidden subcommand that turns the lab binary into a prober.
pub const SUBCOMMAND: &str = "__prober";

/// One answer (or failure) the prober saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeLine {
    pub path: String,
    /// When the request was sent, monotonic milliseconds (same clock in
    /// every process of this machine: CLOCK_MONOTONIC).
    pub sent_ms: f64,
    /// From sending the request to the last byte of the body.
    pub ms: f64,
    /// HTTP status, or 0 if the request failed.
    pub status: u16,
}

/// What the prober does, from its command line.
#[derive(Debug, Clone, PartialEq)]
pub struct ProberArgs {
    pub target: SocketAddr,
    pub interval: Duration,
    /// Every n-th tick also asks for /login.
    pub login_every: u64,
    /// The prober stops by itself after this, whatever the parent does.
    pub max: Duration,
}

impl ProberArgs {
    pub fn to_args(&self) -> Vec<String> {
        vec![
            SUBCOMMAND.into(),
            "--target".into(),
            self.target.to_string(),
            "--interval-ms".into(),
            self.interval.as_millis().to_string(),
            "--login-every".into(),
            self.login_every.to_string(),
            "--max-ms".into(),
            self.max.as_millis().to_string(),
        ]
    }

    /// Parses the arguments after the subcommand.
    pub fn parse(args: &[String]) -> Result<ProberArgs> {
        let mut target = None;
        let mut interval = Duration::from_millis(5);
        let mut login_every = 5;
        let mut max = Duration::from_secs(60);
        let mut flags = Flags::new(args).for_what("prober");
        while let Some(flag) = flags.next_flag()? {
            match flag.name {
                "--target" => {
                    let addr: SocketAddr = flag.parse("an address")?;
                    if !addr.ip().is_loopback() {
                        bail!("--target must be a loopback address, got {addr}");
                    }
                    target = Some(addr);
                }
                "--interval-ms" => interval = flag.millis()?.max(Duration::from_millis(1)),
                "--max-ms" => max = flag.millis()?,
                "--login-every" => login_every = flag.parse("a count")?,
                _ => return Err(flag.unknown()),
            }
        }
        Ok(ProberArgs {
            target: target.context("--target is required")?,
            interval,
            login_every,
            max,
        })
    }
}

/// The `main` of the prober process: its own small runtime, errors printed
/// once, exit code 2 on failure.
pub fn prober_main(args: &[String]) -> ExitCode {
    lab_kit::cli::run_subcommand("prober", async { probe(ProberArgs::parse(args)?).await })
}

/// How many probes may be waiting at once; past that a tick is skipped.
const MAX_OUTSTANDING: usize = 2000;
/// How long the prober waits for late answers after it was told to stop.
const DRAIN: Duration = Duration::from_secs(15);

// ANCHOR: prober
/// Sends GET /health every `interval` without waiting for earlier answers
/// (an open loop: a stalled server gets many probes in flight, so a 2 s
/// stall shows as hundreds of slow answers, not as one), until stdin closes
/// or `max` has passed.
async fn probe(args: ProberArgs) -> Result<()> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(DRAIN)
        .build()
        .context("building the prober's client")?;
    // The parent closes our stdin to say "stop" (or dies, which closes it
    // too). A plain thread reads it: a blocking read that outlives the
    // runtime is then no obstacle to exiting.
    let (closed, stdin_closed) = oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("prober-stdin".into())
        .spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::stdin().lock().read_until(0, &mut sink);
            let _ = closed.send(());
        })
        .context("starting the stdin watcher")?;
    let deadline = tokio::time::sleep(args.max);
    tokio::pin!(deadline, stdin_closed);
    let mut ticker = tokio::time::interval(args.interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut in_flight = JoinSet::new();
    let mut tick: u64 = 0;
    let base = format!("http://{}", args.target);
    loop {
        tokio::select! {
            _ = &mut stdin_closed => break,
            () = &mut deadline => break,
            Some(done) = in_flight.join_next(), if !in_flight.is_empty() => {
                print_line(&done.context("a probe task panicked")?)?;
            }
            _ = ticker.tick() => {
                tick += 1;
                let mut paths = vec!["/health"];
                if args.login_every > 0 && tick.is_multiple_of(args.login_every) {
                    paths.push("/login");
                }
                for path in paths {
                    if in_flight.len() < MAX_OUTSTANDING {
                        let (client, url) = (client.clone(), format!("{base}{path}"));
                        in_flight.spawn(probe_once(client, url, path));
                    }
                }
            }
        }
    }
    // Answers still on their way are the slowest ones: wait for them.
    let drained = tokio::time::timeout(DRAIN, async {
        while let Some(done) = in_flight.join_next().await {
            print_line(&done.context("a probe task panicked")?)?;
        }
        anyhow::Ok(())
    })
    .await;
    match drained {
        Ok(outcome) => outcome,
        Err(_) => bail!(
            "{} probes still unanswered after {DRAIN:?}",
            in_flight.len()
        ),
    }
}

async fn probe_once(client: reqwest::Client, url: String, path: &'static str) -> ProbeLine {
    let sent_ms = monotonic_ms();
    let sent = Instant::now();
    let status = match client.get(&url).send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            match response.bytes().await {
                Ok(_) => status,
                Err(_) => 0,
            }
        }
        Err(_) => 0,
    };
    ProbeLine {
        path: path.into(),
        sent_ms,
        ms: sent.elapsed().as_secs_f64() * 1000.0,
        status,
    }
}
// ANCHOR_END: prober

fn print_line(line: &ProbeLine) -> Result<()> {
    let text = serde_json::to_string(line).context("encoding a probe line")?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}").context("writing to the parent")?;
    stdout.flush().context("flushing to the parent")
}

/// The parent's handle on a running prober process.
pub struct ProberProcess {
    child: ChildGuard,
    stdin: Option<ChildStdin>,
    reader: Option<JoinHandle<Result<()>>>,
    lines: Arc<Mutex<Vec<ProbeLine>>>,
    seen: Arc<AtomicUsize>,
}

impl ProberProcess {
    // ANCHOR: spawn
    /// Starts `exe __prober ...` with pipes on stdin (our "stop") and stdout
    /// (its answers). The kit's `ChildGuard` puts it in a process group of
    /// its own and kills that group on every early exit of the lab (and the
    /// kernel kills it if the lab dies); on a normal exit we close its stdin
    /// and wait, so it can report its slowest answers first.
    pub fn spawn(exe: &Path, args: &ProberArgs) -> Result<ProberProcess> {
        let mut command = Command::new(exe);
        command
            .args(args.to_args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = ChildGuard::spawn_command(command).context("the prober")?;
        // ANCHOR_END: spawn
        let stdout = child.take_stdout().context("the prober has no stdout")?;
        let stdout = tokio::process::ChildStdout::from_std(stdout)
            .context("reading the prober's stdout asynchronously")?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::new(AtomicUsize::new(0));
        let (reader_lines, reader_seen) = (Arc::clone(&lines), Arc::clone(&seen));
        let reader = tokio::spawn(async move {
            let mut stdout = BufReader::new(stdout).lines();
            while let Some(text) = stdout.next_line().await.context("reading the prober")? {
                let line: ProbeLine = serde_json::from_str(&text)
                    .with_context(|| format!("the prober printed {text:?}"))?;
                reader_lines.lock().expect("never poisoned").push(line);
                reader_seen.fetch_add(1, Ordering::SeqCst);
            }
            anyhow::Ok(())
        });
        Ok(ProberProcess {
            stdin: child.take_stdin(),
            child,
            reader: Some(reader),
            lines,
            seen,
        })
    }

    /// Answers received so far.
    pub fn answers(&self) -> usize {
        self.seen.load(Ordering::SeqCst)
    }

    /// Waits (bounded) until the prober has answered `count` probes.
    pub async fn wait_for_answers(&mut self, count: usize, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        while self.answers() < count {
            if Instant::now() > deadline {
                if let Ok(Some(ended)) = self.child.try_ended() {
                    bail!("the prober exited early ({})", ended.describe());
                }
                bail!(
                    "the prober answered {} of {count} probes within {limit:?}",
                    self.answers()
                );
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }

    /// Tells the prober to stop, waits for its last lines and its exit.
    pub async fn finish(mut self) -> Result<Vec<ProbeLine>> {
        drop(self.stdin.take());
        if let Some(reader) = self.reader.take() {
            tokio::time::timeout(DRAIN + Duration::from_secs(5), reader)
                .await
                .context("the prober did not finish in time")?
                .context("the prober reader panicked")??;
        }
        let ended = self
            .child
            .wait_for(Duration::from_secs(5))
            .await
            .context("waiting for the prober")?
            .context("the prober did not exit")?;
        if ended != Ended::Code(0) {
            bail!("the prober failed ({})", ended.describe());
        }
        let lines = std::mem::take(&mut *self.lines.lock().expect("never poisoned"));
        Ok(lines)
    }
}

impl Drop for ProberProcess {
    fn drop(&mut self) {
        if let Some(reader) = self.reader.take() {
            reader.abort();
        }
        // Then `child` drops: SIGKILL to the prober's group, and a reap.
    }
}
