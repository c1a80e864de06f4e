//! What a client without timeouts costs its own process: users arrive at a
//! steady rate, each call goes to a provider that accepts and never answers,
//! and one client process per guard (none, a timeout, a bulkhead) reports
//! what it holds as the calls pile up: resident memory, calls in flight,
//! tasks and sockets. In real time: memory does not compress.

use std::{
    path::PathBuf,
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use lab_kit::{
    Output, Series,
    child::{ChildGuard, Ended},
};
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::{
    Config,
    cost_client::{CostArgs, CostLine, Guard},
    downstream::{Downstream, Shape},
};

/// What one guard's client held, over its run.
#[derive(Debug, Clone, Serialize)]
pub struct CostSummary {
    pub guard: &'static str,
    pub rate_per_s: f64,
    pub run_s: f64,
    /// The client's timeout, 0 for none.
    pub timeout_s: f64,
    /// The bulkhead's limit, 0 for none.
    pub limit: usize,
    pub sent: u64,
    pub ok: u64,
    pub timed_out: u64,
    pub refused_by_bulkhead: u64,
    pub failed: u64,
    pub peak_in_flight: u64,
    pub peak_tasks: u64,
    pub peak_sockets: u64,
    pub rss_start_mb: f64,
    pub rss_peak_mb: f64,
    /// Peak resident memory above the first look, MiB.
    pub rss_growth_mb: f64,
    /// That growth per call in flight at the peak, KiB.
    pub kib_per_call: f64,
}

/// Runs the three clients side by side, each against its own hung
/// provider, and writes their lines as samples and one summary each.
pub async fn run_cost(config: &Config, out: &mut Output) -> Result<()> {
    let [none, timeout, bulkhead] = Guard::ALL;
    let (none, timeout, bulkhead) = tokio::join!(
        run_one(config, none),
        run_one(config, timeout),
        run_one(config, bulkhead)
    );
    for (guard, result) in Guard::ALL.into_iter().zip([none, timeout, bulkhead]) {
        let lines = result.with_context(|| format!("the {} client", guard.name()))?;
        for line in &lines {
            out.write_sample(&guard.series(), line)?;
        }
        out.write_summary(&guard.series(), &summarise(config, guard, &lines)?)?;
    }
    Ok(())
}

async fn run_one(config: &Config, guard: Guard) -> Result<Vec<CostLine>> {
    let provider = Downstream::start(Shape::Silent, config.behaviour()).await?;
    let run = Duration::from_secs_f64(config.cost_run_real_s);
    let args = CostArgs {
        target: provider.addr,
        guard,
        rate_per_s: config.cost_rate_per_s,
        run,
        timeout: Duration::from_secs_f64(config.cost_timeout_real_s),
        limit: config.cost_bulkhead_limit,
        every: Duration::from_millis(config.cost_every_ms),
    };
    let lines = read_client(&config.cost_exe, &args, run + Duration::from_secs(10)).await?;
    drop(provider);
    if lines.len() < 2 {
        bail!(
            "the client printed {} lines, expected one per look",
            lines.len()
        );
    }
    Ok(lines)
}

/// Starts `exe __cost ...`, reads its lines until it exits, within `limit`.
async fn read_client(exe: &PathBuf, args: &CostArgs, limit: Duration) -> Result<Vec<CostLine>> {
    let mut command = Command::new(exe);
    command
        .args(args.to_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = ChildGuard::spawn_command(command)
        .with_context(|| format!("starting {} {}", exe.display(), args.to_args()[0]))?;
    let stdout = child.take_stdout().context("the client has no stdout")?;
    let stdout = tokio::process::ChildStdout::from_std(stdout)
        .context("reading the client's stdout asynchronously")?;
    let reading = async {
        let mut lines = Vec::new();
        let mut stdout = BufReader::new(stdout).lines();
        while let Some(text) = stdout.next_line().await.context("reading the client")? {
            let line: CostLine = serde_json::from_str(&text)
                .with_context(|| format!("the client printed {text:?}"))?;
            lines.push(line);
        }
        anyhow::Ok(lines)
    };
    let lines = tokio::time::timeout(limit, reading)
        .await
        .with_context(|| format!("the client still ran after {limit:?}"))??;
    let ended = child
        .wait_for(Duration::from_secs(5))
        .await?
        .context("the client closed its stdout but did not exit")?;
    if ended != Ended::Code(0) {
        bail!("the client failed ({})", ended.describe());
    }
    Ok(lines)
}

fn summarise(config: &Config, guard: Guard, lines: &[CostLine]) -> Result<CostSummary> {
    let first = lines.first().context("no lines")?;
    let last = lines.last().context("no lines")?;
    let peak = |field: fn(&CostLine) -> u64| lines.iter().map(field).max().unwrap_or(0);
    let rss_peak_mb = lines.iter().map(|line| line.rss_mb).fold(0.0, f64::max);
    let peak_in_flight = peak(|line| line.in_flight);
    let rss_growth_mb = (rss_peak_mb - first.rss_mb).max(0.0);
    Ok(CostSummary {
        guard: guard.name(),
        rate_per_s: config.cost_rate_per_s,
        run_s: config.cost_run_real_s,
        timeout_s: if guard == Guard::Timeout {
            config.cost_timeout_real_s
        } else {
            0.0
        },
        limit: if guard == Guard::Bulkhead {
            config.cost_bulkhead_limit
        } else {
            0
        },
        sent: last.sent,
        ok: last.ok,
        timed_out: last.timed_out,
        refused_by_bulkhead: last.refused_by_bulkhead,
        failed: last.failed,
        peak_in_flight,
        peak_tasks: peak(|line| line.tasks),
        peak_sockets: peak(|line| line.sockets),
        rss_start_mb: first.rss_mb,
        rss_peak_mb,
        rss_growth_mb,
        kib_per_call: if peak_in_flight == 0 {
            0.0
        } else {
            rss_growth_mb * 1024.0 / peak_in_flight as f64
        },
    })
}
