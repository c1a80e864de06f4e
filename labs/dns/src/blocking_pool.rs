//! Part 2, the blocking pool: reqwest's default resolver runs `getaddrinfo`
//! in `spawn_blocking`, on the runtime's blocking pool, behind whatever else
//! the application put there. Each setup gets a runtime of its own (built
//! on a plain thread, since a runtime cannot start inside another), fills
//! its pool with blocking jobs, and times lookups of `localhost` and whole
//! requests through a default `reqwest::Client` while the jobs run.

use std::{
    str::FromStr,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, anyhow};
use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};
use lab_kit::{Series, gauge::Gauge, stats::Latencies};
use serde::Serialize;
use tower_service::Service;

use crate::Config;

lab_kit::series! {
    /// The blocking pool's size and what runs on it when the lookup starts.
    pub enum PoolLoad in "blocking" {
        /// `max_blocking_threads(4)`, libuv's pool size, nothing else running.
        SmallIdle => "4-threads-idle",
        /// The same pool, all four threads held by jobs.
        SmallBusy => "4-threads-4-jobs",
        /// tokio's default pool, nothing else running.
        DefaultIdle => "512-threads-idle",
        /// The default pool with the same four jobs.
        DefaultBusy => "512-threads-4-jobs",
        /// The default pool with more jobs than it has threads.
        DefaultFlooded => "512-threads-flooded",
        /// Four threads held by four jobs that compute (the source's
        /// `pbkdf2`), each until it has used `job_ms` of CPU.
        SmallCpu => "4-threads-4-cpu-jobs",
        /// The default pool beside the same four computing jobs.
        DefaultCpu => "512-threads-4-cpu-jobs",
    }
}

impl PoolLoad {
    /// The pool size to set, `None` for tokio's default.
    fn max_threads(self) -> Option<usize> {
        match self {
            PoolLoad::SmallIdle | PoolLoad::SmallBusy | PoolLoad::SmallCpu => Some(4),
            _ => None,
        }
    }

    fn jobs(self, config: &Config) -> usize {
        match self {
            PoolLoad::SmallIdle | PoolLoad::DefaultIdle => 0,
            PoolLoad::SmallBusy | PoolLoad::DefaultBusy => 4,
            PoolLoad::SmallCpu | PoolLoad::DefaultCpu => 4,
            PoolLoad::DefaultFlooded => config.flood_jobs,
        }
    }

    fn computes(self) -> bool {
        matches!(self, PoolLoad::SmallCpu | PoolLoad::DefaultCpu)
    }
}

/// One setup's lookups and requests.
#[derive(Debug, Clone, Serialize)]
pub struct PoolLookups {
    /// The pool size set (0: tokio's default, not set).
    pub max_blocking_threads: usize,
    pub jobs: usize,
    /// "sleep" (the job holds its thread) or "cpu" (it also holds a core).
    pub job_kind: String,
    pub job_ms: f64,
    pub rounds: usize,
    /// `getaddrinfo("localhost")` through hyper-util's `GaiResolver`.
    pub lookup_p50_ms: f64,
    pub lookup_max_ms: f64,
    /// A GET to `http://localhost:PORT/` through `reqwest::Client::new()`'s
    /// defaults, a new connection each time.
    pub request_p50_ms: f64,
    pub request_max_ms: f64,
    /// The most jobs that ran at once: the pool's real size when flooded.
    pub peak_running_jobs: u64,
}

/// Every setup, one after the other (each is timed against an otherwise
/// quiet machine).
pub async fn run_pools(config: &Config) -> Result<Vec<(String, PoolLookups)>> {
    let server = crate::servers::ok_server().await?;
    let url = format!("http://localhost:{}/", server.addr.port());
    let mut results = Vec::new();
    for load in PoolLoad::ALL {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let thread_config = config.clone();
        let thread_url = url.clone();
        std::thread::Builder::new()
            .name(format!("pool-{}", load.name()))
            .spawn(move || {
                let _ = sender.send(on_own_runtime(load, &thread_config, &thread_url));
            })
            .context("starting the runtime's thread")?;
        let measured = tokio::time::timeout(Duration::from_secs(60), receiver)
            .await
            .map_err(|_| anyhow!("{}: no result within 60 s", load.name()))?
            .map_err(|_| anyhow!("{}: the runtime's thread died", load.name()))?
            .with_context(|| load.name())?;
        results.push((load.series(), measured));
    }
    Ok(results)
}

// ANCHOR: runtime
fn on_own_runtime(load: PoolLoad, config: &Config, url: &str) -> Result<PoolLookups> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(2).enable_all();
    if let Some(threads) = load.max_threads() {
        builder.max_blocking_threads(threads);
    }
    let runtime = builder.build().context("building the runtime")?;
    let measured = runtime.block_on(measure(load, config.clone(), url.to_string()));
    // The jobs of the last round have ended; nothing is left to wait for.
    runtime.shutdown_timeout(Duration::from_secs(2));
    measured
}
// ANCHOR_END: runtime

async fn measure(load: PoolLoad, config: Config, url: String) -> Result<PoolLookups> {
    let job = Duration::from_secs_f64(config.job_ms / 1000.0);
    let running = Gauge::new();
    let mut lookups = Latencies::default();
    let mut requests = Latencies::default();
    // One warm-up of each, so the first round does not time thread starts
    // and the reading of /etc/hosts.
    lookup_localhost().await?;
    request(&url).await?;
    for _ in 0..config.pool_rounds {
        let jobs = hold_the_pool(load.jobs(&config), job, load.computes(), &running);
        let (lookup, fetched) = tokio::join!(lookup_localhost(), request(&url));
        lookups.record(lookup?);
        requests.record(fetched?);
        for joined in jobs {
            tokio::time::timeout(Duration::from_secs(10), joined)
                .await
                .context("a blocking job still running after 10 s")?
                .context("a blocking job panicked")?;
        }
    }
    let lookup_summary = lookups.summary();
    let request_summary = requests.summary();
    Ok(PoolLookups {
        max_blocking_threads: load.max_threads().unwrap_or(0),
        jobs: load.jobs(&config),
        job_kind: if load.computes() { "cpu" } else { "sleep" }.to_string(),
        job_ms: config.job_ms,
        rounds: config.pool_rounds,
        lookup_p50_ms: lookup_summary.p50_ms,
        lookup_max_ms: lookup_summary.max_ms,
        request_p50_ms: request_summary.p50_ms,
        request_max_ms: request_summary.max_ms,
        peak_running_jobs: running.peak(),
    })
}

// ANCHOR: hold
/// `jobs` blocking calls of `job` each (a synchronous file read or database
/// driver that sleeps; a password hash that computes), spawned before the
/// lookup, so they are ahead of it in the pool's queue.
fn hold_the_pool(
    jobs: usize,
    job: Duration,
    computes: bool,
    running: &Gauge,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..jobs)
        .map(|_| {
            let running = running.clone();
            tokio::task::spawn_blocking(move || {
                let _inside = running.enter();
                if computes {
                    spin_for_cpu(job);
                } else {
                    std::thread::sleep(job);
                }
            })
        })
        .collect()
}

/// What reqwest's default resolver does for a new connection: hyper-util's
/// `GaiResolver`, which calls `getaddrinfo` in `spawn_blocking`.
async fn lookup_localhost() -> Result<Duration> {
    let started = Instant::now();
    let mut resolver = GaiResolver::new();
    let name = Name::from_str("localhost").context("the name")?;
    let addresses = tokio::time::timeout(Duration::from_secs(10), resolver.call(name))
        .await
        .context("a lookup still waiting after 10 s")?
        .context("looking up localhost")?;
    let elapsed = started.elapsed();
    if addresses.count() == 0 {
        return Err(anyhow!("localhost resolved to no address"));
    }
    Ok(elapsed)
}
// ANCHOR_END: hold

/// One GET through a default client on a new connection.
async fn request(url: &str) -> Result<Duration> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("building the client")?;
    let started = Instant::now();
    let response = tokio::time::timeout(Duration::from_secs(10), client.get(url).send())
        .await
        .context("a request still waiting after 10 s")?
        .context("sending to localhost")?;
    response.bytes().await.context("reading the body")?;
    Ok(started.elapsed())
}

/// Computes until this thread has used `cpu` of CPU time (not wall time:
/// on a machine with fewer cores than jobs, each job takes longer, as a
/// hash does).
fn spin_for_cpu(cpu: Duration) {
    let start = thread_cpu_time();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    while thread_cpu_time().saturating_sub(start) < cpu {
        for _ in 0..1_000_000 {
            state = state.rotate_left(7).wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 1;
        }
        std::hint::black_box(state);
    }
}

fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to fill in.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if status != 0 {
        return Duration::MAX; // no CPU clock: end the job at once
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}
