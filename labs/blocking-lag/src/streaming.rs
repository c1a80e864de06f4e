//! The streaming part: one report read from a database, delivered in memory
//! or streamed in pages, each by a server process of its own (see
//! `report_server`). For each: the server's resident memory over time and
//! at its peak, the time to the first byte and to the last at the client,
//! and `/health` from the prober process meanwhile.

use std::{
    path::Path,
    process::{ChildStdin, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use lab_kit::{
    Output, Series,
    child::{ChildGuard, Ended},
    clock::monotonic_ms,
    process::status_field_kib,
    stats::Latencies,
};
use serde::Serialize;
use tokio::{
    io::{AsyncBufReadExt, BufReader, Lines},
    process::ChildStdout,
    sync::oneshot,
};

use crate::{
    Config,
    prober::{ProbeLine, ProberArgs, ProberProcess},
    report::{FNV_START, checksum},
    report_server::{Delivery, ReportServerArgs, ServerLine},
};

/// A report server process and the lines it prints.
pub struct ReportChild {
    child: ChildGuard,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    pub addr: std::net::SocketAddr,
    pub build_ms: f64,
    pub peak_reset: bool,
}

impl ReportChild {
    /// Starts `exe __report_server ...` and waits (bounded) until it listens.
    pub async fn start(exe: &Path, args: &ReportServerArgs) -> Result<ReportChild> {
        let mut command = Command::new(exe);
        command
            .args(args.to_args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = ChildGuard::spawn_command(command).context("the report server")?;
        let stdout = child
            .take_stdout()
            .context("the report server has no stdout")?;
        let stdout = ChildStdout::from_std(stdout)
            .context("reading the report server's stdout asynchronously")?;
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(Duration::from_secs(30), next_line(&mut lines))
            .await
            .context("the report server did not listen within 30 s")??;
        let ServerLine::Ready {
            addr,
            build_ms,
            peak_reset,
        } = ready
        else {
            bail!("the report server's first line was {ready:?}");
        };
        Ok(ReportChild {
            stdin: child.take_stdin(),
            child,
            lines,
            addr,
            build_ms,
            peak_reset,
        })
    }

    /// One field of the server's `/proc/PID/status`, in KiB.
    pub fn status_kib(&self, key: &str) -> Result<u64> {
        let path = format!("/proc/{}/status", self.child.pid());
        let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        status_field_kib(&status, key).with_context(|| format!("no {key} line in {path}"))
    }

    /// Closes its stdin, reads its last line, waits (bounded) for its exit;
    /// returns the pages it streamed.
    pub async fn stop(mut self) -> Result<u64> {
        drop(self.stdin.take());
        let done = tokio::time::timeout(Duration::from_secs(10), next_line(&mut self.lines))
            .await
            .context("the report server did not stop within 10 s")??;
        let ServerLine::Done { pages } = done else {
            bail!("the report server's last line was {done:?}");
        };
        let ended = self
            .child
            .wait_for(Duration::from_secs(5))
            .await?
            .context("the report server did not exit")?;
        ensure!(
            ended == Ended::Code(0),
            "the report server failed ({})",
            ended.describe()
        );
        Ok(pages)
    }
}

async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> Result<ServerLine> {
    let text = lines
        .next_line()
        .await
        .context("reading the report server")?
        .context("the report server closed its stdout")?;
    serde_json::from_str(&text).with_context(|| format!("the report server printed {text:?}"))
}

/// One look at the server's resident memory.
#[derive(Debug, Clone, Serialize)]
pub struct RssSample {
    /// Ms since the report was asked for (negative: before).
    pub t_ms: f64,
    /// Resident memory above what it was before the report, MiB.
    pub mb: f64,
}

/// What one delivery's run observed.
#[derive(Debug, Clone, Serialize)]
pub struct DeliverySummary {
    pub rows: usize,
    pub page_rows: usize,
    /// Pages the server sent (0: one body).
    pub pages: u64,
    pub bytes: usize,
    /// FNV-1a of the body, as hex: the same report whichever the delivery.
    pub checksum: String,
    pub db_build_ms: f64,
    /// Resident memory before the report, its peak while it ran, and the
    /// difference (MiB). The peak is the kernel's `VmHWM`, reset after the
    /// database was built, or where that is refused the largest sample.
    pub baseline_mb: f64,
    pub peak_mb: f64,
    pub growth_mb: f64,
    pub peak_source: String,
    /// The largest `VmRSS` sample above the baseline (MiB).
    pub sampled_growth_mb: f64,
    /// At the client, from the request: the response head, the first body
    /// byte, the last.
    pub headers_ms: f64,
    pub first_byte_ms: f64,
    pub total_ms: f64,
    pub body_frames: usize,
    /// /health answers sent between the request and the last byte.
    pub health_count: usize,
    pub health_p50_ms: f64,
    pub health_p99_ms: f64,
    pub health_max_ms: f64,
    /// /health answers that failed, over the whole run.
    pub health_failed: usize,
}

/// Everything one delivery produced.
pub struct DeliveryRun {
    pub rss: Vec<RssSample>,
    pub summary: DeliverySummary,
}

/// The deliveries `stream_deliveries` names, in that order.
pub fn deliveries(config: &Config) -> Result<Vec<Delivery>> {
    config
        .stream_deliveries
        .iter()
        .map(|name| {
            Delivery::named(name)
                .with_context(|| format!("no delivery named {name:?}: in-memory or streamed"))
        })
        .collect()
}

/// The whole part, as records on `out`.
pub async fn stream_report(config: &Config, out: &mut Output) -> Result<()> {
    let deliveries = deliveries(config)?;
    // Every server first: their databases fill at the same time.
    let started = Instant::now();
    let starting = deliveries.iter().map(|delivery| {
        eprintln!("blocking-lag: report from SQLite, {}", delivery.name());
        let args = ReportServerArgs {
            delivery: *delivery,
            rows: config.stream_rows,
            page_rows: config.page_rows,
            max: Duration::from_secs(60),
            fail_after_pages: None,
        };
        async move { ReportChild::start(&config.prober_exe, &args).await }
    });
    let servers = futures_util::future::try_join_all(starting).await?;
    eprintln!(
        "blocking-lag: {} orders in each server's SQLite after {:.0} ms",
        config.stream_rows,
        started.elapsed().as_secs_f64() * 1000.0
    );
    for (delivery, server) in deliveries.iter().zip(servers) {
        let run = measure_delivery(server, config)
            .await
            .with_context(|| format!("delivery {}", delivery.name()))?;
        for sample in &run.rss {
            out.write_sample(&format!("rss-{}", delivery.series()), sample)?;
        }
        out.write_summary(&delivery.series(), &run.summary)?;
    }
    eprintln!(
        "blocking-lag: the report from SQLite, both ways, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A thread reading the server's `VmRSS` every few milliseconds, until told
/// to stop: (monotonic ms, KiB) pairs.
struct RssSampler {
    stop: oneshot::Sender<()>,
    thread: std::thread::JoinHandle<Vec<(f64, u64)>>,
}

impl RssSampler {
    fn start(server: &ReportChild, every: Duration) -> Result<RssSampler> {
        let path = format!("/proc/{}/status", server.child.pid());
        let (stop, mut stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("rss-sampler".into())
            .spawn(move || {
                let mut samples = Vec::new();
                // Bounded: at most a minute of samples.
                let started = Instant::now();
                while stopped.try_recv().is_err() && started.elapsed() < Duration::from_secs(60) {
                    let status = std::fs::read_to_string(&path).unwrap_or_default();
                    if let Some(kib) = status_field_kib(&status, "VmRSS") {
                        samples.push((monotonic_ms(), kib));
                    }
                    std::thread::sleep(every);
                }
                samples
            })
            .context("starting the memory sampler")?;
        Ok(RssSampler { stop, thread })
    }

    async fn finish(self) -> Result<Vec<(f64, u64)>> {
        let _ = self.stop.send(());
        let thread = self.thread;
        tokio::task::spawn_blocking(move || thread.join())
            .await
            .context("joining the memory sampler")?
            .map_err(|_| anyhow::anyhow!("the memory sampler panicked"))
    }
}

/// One delivery: prober, quiet, the report read to its last byte, quiet.
async fn measure_delivery(server: ReportChild, config: &Config) -> Result<DeliveryRun> {
    let mut prober = ProberProcess::spawn(
        &config.prober_exe,
        &ProberArgs {
            target: server.addr,
            interval: Duration::from_millis(config.probe_interval_ms),
            login_every: 0,
            max: Duration::from_secs(60),
        },
    )?;
    prober
        .wait_for_answers(10, Duration::from_secs(10))
        .await
        .context("waiting for the prober's first answers")?;
    let baseline_kib = server.status_kib("VmRSS")?;
    let sampler = RssSampler::start(&server, Duration::from_millis(config.stream_sample_ms))?;
    let quiet = Duration::from_millis(config.quiet_ms / 2);
    tokio::time::sleep(quiet).await;

    // ANCHOR: client
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .context("building the report client")?;
    let asked_ms = monotonic_ms();
    let asked = Instant::now();
    let mut response = client
        .get(format!("http://{}/report", server.addr))
        .send()
        .await?
        .error_for_status()?;
    let headers_ms = asked.elapsed().as_secs_f64() * 1000.0;
    let (mut first_byte_ms, mut bytes, mut frames, mut hash) = (None, 0, 0, FNV_START);
    while let Some(frame) = response.chunk().await? {
        first_byte_ms.get_or_insert(asked.elapsed().as_secs_f64() * 1000.0);
        (bytes, frames) = (bytes + frame.len(), frames + 1);
        hash = checksum(hash, &frame);
    }
    let total_ms = asked.elapsed().as_secs_f64() * 1000.0;
    // ANCHOR_END: client
    let answered_ms = monotonic_ms();

    tokio::time::sleep(quiet).await;
    let samples = sampler.finish().await?;
    let hwm_kib = server.status_kib("VmHWM")?;
    let probes = prober.finish().await?;
    let peak_reset = server.peak_reset;
    let build_ms = server.build_ms;
    let pages = server.stop().await?;

    let mib = |kib: u64| kib as f64 / 1024.0;
    let rss: Vec<RssSample> = samples
        .iter()
        .map(|&(at_ms, kib)| RssSample {
            t_ms: at_ms - asked_ms,
            mb: mib(kib) - mib(baseline_kib),
        })
        .collect();
    let sampled_peak_kib = samples.iter().map(|&(_, kib)| kib).max().unwrap_or(0);
    let sampled_growth_mb = (mib(sampled_peak_kib) - mib(baseline_kib)).max(0.0);
    let (peak_kib, peak_source) = if peak_reset {
        (hwm_kib, "VmHWM")
    } else {
        (sampled_peak_kib, "sampled VmRSS")
    };
    let health = health_meanwhile(&probes, asked_ms, answered_ms)?;
    let health_failed = probes.iter().filter(|probe| probe.status != 200).count();
    Ok(DeliveryRun {
        rss,
        summary: DeliverySummary {
            rows: config.stream_rows,
            page_rows: config.page_rows,
            pages,
            bytes,
            checksum: format!("{hash:016x}"),
            db_build_ms: build_ms,
            baseline_mb: mib(baseline_kib),
            peak_mb: mib(peak_kib),
            growth_mb: (mib(peak_kib) - mib(baseline_kib)).max(0.0),
            peak_source: peak_source.into(),
            sampled_growth_mb,
            headers_ms,
            first_byte_ms: first_byte_ms.unwrap_or(total_ms),
            total_ms,
            body_frames: frames,
            health_count: health.count,
            health_p50_ms: health.p50_ms,
            health_p99_ms: health.p99_ms,
            health_max_ms: health.max_ms,
            health_failed,
        },
    })
}

/// The /health answers sent while the report was on its way.
fn health_meanwhile(
    probes: &[ProbeLine],
    from_ms: f64,
    to_ms: f64,
) -> Result<lab_kit::stats::LatencySummary> {
    let mut latencies = Latencies::default();
    for probe in probes {
        if probe.path == "/health" && probe.sent_ms >= from_ms && probe.sent_ms <= to_ms {
            latencies.record(Duration::from_secs_f64(probe.ms.max(0.0) / 1000.0));
        }
    }
    ensure!(
        !latencies.is_empty(),
        "no /health probe was sent while the report ran"
    );
    Ok(latencies.summary())
}
