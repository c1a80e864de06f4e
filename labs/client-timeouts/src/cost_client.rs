//! The client process of the cost part: an open loop of requests to one
//! downstream, and every `--every-ms` one line on stdout with what the
//! process holds (resident memory, requests in flight, tasks, sockets).
//!
//! It is a process of its own so that its resident memory is its requests'
//! and nothing else's: the lab binary re-executes itself with the hidden
//! subcommand `__cost`, one process per guard, and the parent reads the lines.

use std::{
    io::Write,
    net::SocketAddr,
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result, bail};
use lab_kit::flags::Flags;
use serde::{Deserialize, Serialize};
use tokio::{sync::Semaphore, time::Instant};

/// The hidden subcommand that turns the lab binary into the cost client.
pub const SUBCOMMAND: &str = "__cost";

lab_kit::series! {
    /// What guards the client's calls in the cost part.
    pub enum Guard in "cost" {
        /// `reqwest::Client::new()`: nothing ends a call to a hung provider.
        NoTimeout => "no-timeout",
        /// `.timeout(..)` on the client: every call ends by then.
        Timeout => "timeout",
        /// No timeout, but at most `limit` calls at once; the rest are
        /// refused at once.
        Bulkhead => "bulkhead",
    }
}

/// What the client does, from its command line.
#[derive(Debug, Clone, PartialEq)]
pub struct CostArgs {
    pub target: SocketAddr,
    pub guard: Guard,
    pub rate_per_s: f64,
    pub run: Duration,
    pub timeout: Duration,
    pub limit: usize,
    pub every: Duration,
}

impl CostArgs {
    pub fn to_args(&self) -> Vec<String> {
        vec![
            SUBCOMMAND.into(),
            "--target".into(),
            self.target.to_string(),
            "--guard".into(),
            self.guard.name().into(),
            "--rate-per-s".into(),
            self.rate_per_s.to_string(),
            "--run-ms".into(),
            self.run.as_millis().to_string(),
            "--timeout-ms".into(),
            self.timeout.as_millis().to_string(),
            "--limit".into(),
            self.limit.to_string(),
            "--every-ms".into(),
            self.every.as_millis().to_string(),
        ]
    }

    /// Parses the arguments after the subcommand.
    pub fn parse(args: &[String]) -> Result<CostArgs> {
        let mut target = None;
        let mut guard = None;
        let mut rate_per_s = 100.0;
        let mut run = Duration::from_secs(4);
        let mut timeout = Duration::from_secs(2);
        let mut limit = 20;
        let mut every = Duration::from_millis(100);
        let mut flags = Flags::new(args).for_what("cost client");
        while let Some(flag) = flags.next_flag()? {
            match flag.name {
                "--target" => {
                    let addr: SocketAddr = flag.parse("an address")?;
                    if !addr.ip().is_loopback() {
                        bail!("--target must be a loopback address, got {addr}");
                    }
                    target = Some(addr);
                }
                "--guard" => {
                    guard = Some(Guard::named(flag.value).with_context(|| {
                        format!(
                            "--guard {:?} is not no-timeout, timeout or bulkhead",
                            flag.value
                        )
                    })?)
                }
                "--rate-per-s" => rate_per_s = flag.parse("a rate")?,
                "--run-ms" => run = flag.millis()?,
                "--timeout-ms" => timeout = flag.millis()?,
                "--limit" => limit = flag.parse("a count")?,
                "--every-ms" => every = flag.millis()?.max(Duration::from_millis(10)),
                _ => return Err(flag.unknown()),
            }
        }
        if !(rate_per_s > 0.0 && rate_per_s <= 10_000.0) {
            bail!("--rate-per-s must be above 0 and at most 10000, got {rate_per_s}");
        }
        Ok(CostArgs {
            target: target.context("--target is required")?,
            guard: guard.context("--guard is required")?,
            rate_per_s,
            run,
            timeout,
            limit: limit.max(1),
            every,
        })
    }
}

/// One look at the client process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CostLine {
    /// Seconds since the first request.
    pub t_s: f64,
    /// Resident memory (`VmRSS` in /proc/self/status), MiB.
    pub rss_mb: f64,
    /// Calls started and not yet ended.
    pub in_flight: u64,
    /// Tasks alive on the client's runtime (the calls' and hyper's
    /// connection tasks).
    pub tasks: u64,
    /// Sockets the process holds (links to `socket:` in /proc/self/fd).
    pub sockets: u64,
    pub sent: u64,
    pub ok: u64,
    pub timed_out: u64,
    pub refused_by_bulkhead: u64,
    pub failed: u64,
}

/// The `main` of the cost client: its own small runtime, errors printed
/// once, exit code 2 on failure.
pub fn cost_main(args: &[String]) -> ExitCode {
    lab_kit::cli::run_subcommand("cost client", async { drive(CostArgs::parse(args)?).await })
}

#[derive(Default)]
struct Counters {
    in_flight: AtomicU64,
    sent: AtomicU64,
    ok: AtomicU64,
    timed_out: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
}

// ANCHOR: client
/// Sends one GET every 1/rate seconds without waiting for earlier answers
/// (an open loop, as users arrive), for `run`; prints a line every `every`.
async fn drive(args: CostArgs) -> Result<()> {
    let mut builder = reqwest::Client::builder().no_proxy();
    if args.guard == Guard::Timeout {
        builder = builder.timeout(args.timeout);
    }
    let client = builder.build().context("building the client")?;
    let bulkhead = Arc::new(Semaphore::new(args.limit));
    // ANCHOR_END: client
    let counters = Arc::new(Counters::default());
    let url = format!("http://{}/enrich", args.target);
    let start = Instant::now();
    let mut arrivals = tokio::time::interval(Duration::from_secs_f64(1.0 / args.rate_per_s));
    arrivals.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut looks = tokio::time::interval(args.every);
    let end = tokio::time::sleep(args.run);
    tokio::pin!(end);
    loop {
        tokio::select! {
            () = &mut end => break,
            _ = looks.tick() => print_line(&look(&counters, start)?)?,
            _ = arrivals.tick() => {
                counters.sent.fetch_add(1, Ordering::SeqCst);
                let permit = if args.guard == Guard::Bulkhead {
                    match Arc::clone(&bulkhead).try_acquire_owned() {
                        Ok(permit) => Some(permit),
                        Err(_) => {
                            counters.refused.fetch_add(1, Ordering::SeqCst);
                            continue;
                        }
                    }
                } else {
                    None
                };
                let (client, url, counters) = (client.clone(), url.clone(), Arc::clone(&counters));
                tokio::spawn(async move {
                    counters.in_flight.fetch_add(1, Ordering::SeqCst);
                    let outcome = client.get(&url).send().await;
                    let ended = match &outcome {
                        Ok(_) => &counters.ok,
                        Err(error) if error.is_timeout() => &counters.timed_out,
                        Err(_) => &counters.failed,
                    };
                    ended.fetch_add(1, Ordering::SeqCst);
                    counters.in_flight.fetch_sub(1, Ordering::SeqCst);
                    drop(permit);
                });
            }
        }
    }
    print_line(&look(&counters, start)?)?;
    Ok(())
}

fn look(counters: &Counters, start: Instant) -> Result<CostLine> {
    let load = |counter: &AtomicU64| counter.load(Ordering::SeqCst);
    Ok(CostLine {
        t_s: start.elapsed().as_secs_f64(),
        rss_mb: resident_kib()? as f64 / 1024.0,
        in_flight: load(&counters.in_flight),
        tasks: tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks() as u64,
        sockets: sockets()?,
        sent: load(&counters.sent),
        ok: load(&counters.ok),
        timed_out: load(&counters.timed_out),
        refused_by_bulkhead: load(&counters.refused),
        failed: load(&counters.failed),
    })
}

/// `VmRSS` of this process, KiB.
pub fn resident_kib() -> Result<u64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    vm_rss_kib(&status).context("no VmRSS line in /proc/self/status")
}

/// The `VmRSS:   1234 kB` line of a /proc/PID/status text.
pub fn vm_rss_kib(status: &str) -> Option<u64> {
    lab_kit::process::status_field_kib(status, "VmRSS")
}

/// Sockets among this process's open file descriptors.
fn sockets() -> Result<u64> {
    let mut count = 0;
    for entry in std::fs::read_dir("/proc/self/fd").context("reading /proc/self/fd")? {
        let Ok(entry) = entry else { continue };
        if let Ok(target) = std::fs::read_link(entry.path())
            && target.to_string_lossy().starts_with("socket:")
        {
            count += 1;
        }
    }
    Ok(count)
}

fn print_line(line: &CostLine) -> Result<()> {
    let text = serde_json::to_string(line).context("encoding a cost line")?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}").context("writing to the parent")?;
    stdout.flush().context("flushing to the parent")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_resident_set_from_a_status_text() {
        let status = "Name:\tlab\nVmPeak:\t  9000 kB\nVmRSS:\t   5120 kB\nThreads:\t2\n";
        assert_eq!(vm_rss_kib(status), Some(5120));
        assert_eq!(vm_rss_kib("Name:\tlab\n"), None);
    }

    #[test]
    fn the_arguments_go_through_the_command_line_and_back() {
        let args = CostArgs {
            target: "127.0.0.1:8080".parse().unwrap(),
            guard: Guard::Bulkhead,
            rate_per_s: 50.0,
            run: Duration::from_millis(1500),
            timeout: Duration::from_millis(700),
            limit: 7,
            every: Duration::from_millis(50),
        };
        assert_eq!(CostArgs::parse(&args.to_args()[1..]).unwrap(), args);
        let far = lab_kit::flags::to_args(&["--target", "10.0.0.1:80", "--guard", "timeout"]);
        assert!(CostArgs::parse(&far).is_err());
        let bad = lab_kit::flags::to_args(&["--target", "127.0.0.1:80", "--guard", "none"]);
        assert!(CostArgs::parse(&bad).is_err());
    }
}
