//! Blocking the runtime: a report handler that does 1.5 million rows of CPU
//! work, measured from outside (a separate prober process hitting /health)
//! and from inside (a lag probe on the server's runtime), on a current_thread
//! runtime, on two workers, and with five ways of moving the work.
//!
//! Each variant gets a fresh server on a runtime of its own (see `server`),
//! a fresh prober process (see `prober`), a short quiet period, the report
//! request(s), a short quiet period again, and then the numbers.

pub mod prober;
pub mod report;
pub mod server;

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, ensure};
use lab_kit::{
    Meta, Mode, Output,
    clock::monotonic_ms,
    stats::{Latencies, percentile},
};
use serde::Serialize;

use crate::{
    prober::{ProbeLine, ProberArgs, ProberProcess},
    server::{Flavour, RunningServer, ServerRecord, ServerSettings, Strategy},
};

/// The lab's slug: its folder, chapter, data file and charts.
pub const SLUG: &str = "blocking-lag";

/// One server setup the lab measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    pub name: &'static str,
    pub flavour: Flavour,
    /// Reports requested at the same moment.
    pub reports: usize,
    pub strategy: Strategy,
    /// Rounds of `reports`, one after another: more than one where the
    /// outcome is a race worth counting (see `Config::race_rounds`).
    pub repeat_for_race: bool,
}

const TWO_WORKERS: Flavour = Flavour::MultiThread { workers: 2 };

impl Variant {
    /// Every variant, in the order the chapter discusses them. The fixes run
    /// in the hardest case the multi-thread runtime met: two reports at once
    /// on two workers.
    pub const ALL: [Variant; 7] = [
        Variant::new(
            "current-thread",
            Flavour::CurrentThread,
            1,
            Strategy::Inline,
        ),
        Variant::new("two-workers", TWO_WORKERS, 1, Strategy::Inline).repeated(),
        Variant::new("two-reports", TWO_WORKERS, 2, Strategy::Inline),
        Variant::new("spawn-blocking", TWO_WORKERS, 2, Strategy::SpawnBlocking),
        Variant::new("rayon", TWO_WORKERS, 2, Strategy::Rayon),
        Variant::new("background-job", TWO_WORKERS, 2, Strategy::BackgroundJob),
        Variant::new("chunked", TWO_WORKERS, 2, Strategy::Chunked),
    ];

    pub const fn new(
        name: &'static str,
        flavour: Flavour,
        reports: usize,
        strategy: Strategy,
    ) -> Variant {
        Variant {
            name,
            flavour,
            reports,
            strategy,
            repeat_for_race: false,
        }
    }

    /// The same variant, run for `Config::race_rounds` rounds.
    pub const fn repeated(mut self) -> Variant {
        self.repeat_for_race = true;
        self
    }

    /// A variant by name.
    pub fn named(name: &str) -> Option<Variant> {
        Variant::ALL
            .into_iter()
            .find(|variant| variant.name == name)
    }

    fn runtime_label(&self) -> String {
        match self.flavour {
            Flavour::CurrentThread => "current_thread".into(),
            Flavour::MultiThread { workers } => format!("multi_thread({workers})"),
        }
    }

    fn strategy_label(&self) -> &'static str {
        match self.strategy {
            Strategy::Inline => "inline",
            Strategy::SpawnBlocking => "spawn_blocking",
            Strategy::Rayon => "rayon",
            Strategy::BackgroundJob => "background job",
            Strategy::Chunked => "chunked",
        }
    }
}

/// What one run measures.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// Rows the report builds, sorts and renders.
    pub rows: usize,
    /// The chunked report yields after this many rows.
    pub chunk_rows: usize,
    /// The prober sends GET /health this often (milliseconds).
    pub probe_interval_ms: u64,
    /// ...and GET /login every this many ticks.
    pub login_every: u64,
    /// The lag probe inside the server wakes this often (milliseconds).
    pub lag_interval_ms: u64,
    /// Quiet time before the report and after it (milliseconds).
    pub quiet_ms: u64,
    /// Rounds of the variants whose outcome is a race (one report on two
    /// workers: does the other worker get to the I/O driver or not?).
    pub race_rounds: usize,
    /// Threads of the rayon pool in the rayon variant.
    pub rayon_threads: usize,
    /// A poll longer than this is slow for the per-route task monitors (ms).
    pub slow_poll_ms: u64,
    /// The variants run, by name.
    pub variant_names: Vec<&'static str>,
    #[serde(skip)]
    pub variants: Vec<Variant>,
    /// The lab binary, re-executed as the prober.
    #[serde(skip)]
    pub prober_exe: PathBuf,
}

impl Config {
    /// The settings for a mode; `prober_exe` is the lab binary (the prober
    /// is the same binary with a hidden subcommand).
    pub fn for_mode(mode: Mode, prober_exe: PathBuf) -> Config {
        let (rows, quiet_ms, race_rounds) = match mode {
            // About 0.2 s of report on an idle 2-core machine (twice that
            // when others compile): seven variants fit in the quick budget.
            Mode::Quick => (600_000, 200, 4),
            // The seed's size: 1.5 million rows.
            Mode::Full => (1_500_000, 1000, 12),
        };
        let mut config = Config::with_variants(rows, quiet_ms, &Variant::ALL, prober_exe);
        config.race_rounds = race_rounds;
        config
    }

    /// The same settings for a chosen list of variants and a report size.
    pub fn with_variants(
        rows: usize,
        quiet_ms: u64,
        variants: &[Variant],
        prober_exe: PathBuf,
    ) -> Config {
        Config {
            rows,
            chunk_rows: 10_000,
            probe_interval_ms: 5,
            login_every: 5,
            lag_interval_ms: 5,
            quiet_ms,
            race_rounds: 1,
            rayon_threads: 1,
            slow_poll_ms: 10,
            variant_names: variants.iter().map(|variant| variant.name).collect(),
            variants: variants.to_vec(),
            prober_exe,
        }
    }
}

/// One /health answer, placed on the variant's timeline.
#[derive(Debug, Clone, Serialize)]
pub struct HealthSample {
    /// When the probe was sent, ms since the variant's prober started.
    pub t_ms: f64,
    /// How long the answer took.
    pub ms: f64,
    pub ok: bool,
}

/// One lag-probe wake-up, on the same timeline.
#[derive(Debug, Clone, Serialize)]
pub struct LagPoint {
    /// When the tick was due, ms since the variant's prober started.
    pub t_ms: f64,
    /// How late the task woke.
    pub ms: f64,
}

/// What one variant's run observed.
#[derive(Debug, Clone, Serialize)]
pub struct VariantSummary {
    pub runtime: String,
    pub strategy: String,
    pub reports: usize,
    pub rows: usize,
    /// Rounds of `reports` run one after another, and in how many of them
    /// the slowest /health sent during the round waited at least half the
    /// round: the whole server stalled, not just one connection.
    pub rounds: usize,
    pub stalled_rounds: usize,
    /// When the first report's computation started and the last one ended,
    /// ms since the prober started (the chart marks these).
    pub report_start_ms: f64,
    pub report_end_ms: f64,
    /// When each report's computation started and ended, ms since the prober
    /// started, in time order (the two-workers chart marks
    /// every round with these).
    pub report_starts_ms: Vec<f64>,
    pub report_ends_ms: Vec<f64>,
    /// Mean time one report's computation took, as the server timed it.
    pub report_ms: f64,
    /// How long the client waited for its (first) answer: for the background
    /// job that is the 202, not the report.
    pub report_response_ms: f64,
    /// /health answers received, failed, and their latency.
    pub health_count: usize,
    pub health_failed: usize,
    pub health_p50_ms: f64,
    pub health_p99_ms: f64,
    pub health_max_ms: f64,
    pub login_max_ms: f64,
    /// The lag probe inside the server.
    pub lag_count: usize,
    pub lag_p50_ms: f64,
    pub lag_p99_ms: f64,
    pub lag_max_ms: f64,
    /// tokio-metrics, per route: polls of the /report handler future, how
    /// many were slow (longer than slow_poll_ms), and their total time.
    pub report_polls: u64,
    pub report_slow_polls: u64,
    pub report_slow_poll_ms: f64,
    pub health_slow_polls: u64,
}

/// The whole lab: every variant in turn, as records on `out`.
pub async fn run(mode: Mode, config: &Config, out: &mut Output) -> Result<()> {
    out.meta(Meta::describe(SLUG, mode, 1.0, config)?)?;
    for variant in &config.variants {
        eprintln!(
            "blocking-lag: {} ({}, {} x {} report)",
            variant.name,
            variant.runtime_label(),
            variant.reports,
            variant.strategy_label()
        );
        let measured = measure(variant, config)
            .await
            .with_context(|| format!("variant {}", variant.name))?;
        for sample in &measured.health {
            out.sample(&format!("health-{}", variant.name), sample)?;
        }
        for point in &measured.lag {
            out.sample(&format!("lag-{}", variant.name), point)?;
        }
        out.summary_of(variant.name, &measured.summary)?;
    }
    Ok(())
}

/// Everything one variant produced.
pub struct Measured {
    pub health: Vec<HealthSample>,
    pub lag: Vec<LagPoint>,
    pub summary: VariantSummary,
}

/// One variant: fresh server, fresh prober, quiet, report(s), quiet, numbers.
pub async fn measure(variant: &Variant, config: &Config) -> Result<Measured> {
    let server = RunningServer::start(ServerSettings {
        flavour: variant.flavour,
        strategy: variant.strategy,
        rows: config.rows,
        chunk_rows: config.chunk_rows,
        rayon_threads: config.rayon_threads,
        lag_interval: Duration::from_millis(config.lag_interval_ms),
        slow_poll: Duration::from_millis(config.slow_poll_ms),
    })
    .await?;
    let origin_ms = monotonic_ms();
    let mut prober = ProberProcess::spawn(
        &config.prober_exe,
        &ProberArgs {
            target: server.addr,
            interval: Duration::from_millis(config.probe_interval_ms),
            login_every: config.login_every,
            max: Duration::from_secs(120),
        },
    )?;
    // The prober must be answering before the report starts, or the chart
    // would have no "before".
    prober
        .wait_for_answers(10, Duration::from_secs(10))
        .await
        .context("waiting for the prober's first answers")?;
    tokio::time::sleep(Duration::from_millis(config.quiet_ms)).await;

    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(120))
        .build()
        .context("building the report client")?;
    let base = format!("http://{}", server.addr);
    let rounds = if variant.repeat_for_race {
        config.race_rounds.max(1)
    } else {
        1
    };
    let mut response_ms = Vec::new();
    let mut round_windows = Vec::new();
    for round in 0..rounds {
        if round > 0 {
            tokio::time::sleep(Duration::from_millis(config.quiet_ms / 2)).await;
        }
        let round_start = monotonic_ms();
        let mut requests = tokio::task::JoinSet::new();
        for _ in 0..variant.reports {
            let (client, base, strategy) = (client.clone(), base.clone(), variant.strategy);
            requests.spawn(async move { ask_for_report(&client, &base, strategy).await });
        }
        while let Some(joined) = requests.join_next().await {
            response_ms.push(joined.context("a report request panicked")??);
        }
        round_windows.push((round_start, monotonic_ms()));
    }
    tokio::time::sleep(Duration::from_millis(config.quiet_ms)).await;
    let probes = prober.finish().await?;
    drop(client);
    let record = server.stop().await?;
    summarise(
        variant,
        config,
        origin_ms,
        &probes,
        &record,
        &response_ms,
        &round_windows,
    )
}

// ANCHOR: client
/// Asks for one report and returns how long the client waited for its
/// answer. For the background job: POST, 202 with a Location, then poll it.
async fn ask_for_report(client: &reqwest::Client, base: &str, strategy: Strategy) -> Result<f64> {
    let asked = Instant::now();
    if strategy != Strategy::BackgroundJob {
        let response = client.get(format!("{base}/report")).send().await?;
        let body = response.error_for_status()?.text().await?;
        ensure!(body.ends_with("bytes\n"), "unexpected report body {body:?}");
        return Ok(asked.elapsed().as_secs_f64() * 1000.0);
    }
    let accepted = client
        .post(format!("{base}/reports"))
        .send()
        .await?
        .error_for_status()?;
    let answered_ms = asked.elapsed().as_secs_f64() * 1000.0;
    ensure!(
        accepted.status() == reqwest::StatusCode::ACCEPTED,
        "expected 202, got {}",
        accepted.status()
    );
    let location = accepted
        .headers()
        .get(reqwest::header::LOCATION)
        .context("a 202 without a Location")?
        .to_str()
        .context("a Location that is not text")?
        .to_string();
    // Bounded polling: a real client would back off; 20 ms keeps the lab short.
    for _ in 0..6000 {
        let status = client.get(format!("{base}{location}")).send().await?;
        if status.status() == reqwest::StatusCode::OK {
            return Ok(answered_ms);
        }
        status.error_for_status()?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("the report job at {location} did not finish within two minutes")
}
// ANCHOR_END: client

fn summarise(
    variant: &Variant,
    config: &Config,
    origin_ms: f64,
    probes: &[ProbeLine],
    record: &ServerRecord,
    response_ms: &[f64],
    round_windows: &[(f64, f64)],
) -> Result<Measured> {
    let expected = variant.reports * round_windows.len();
    ensure!(
        record.spans.len() == expected,
        "the server ran {} of {expected} reports",
        record.spans.len()
    );
    let stalled_rounds = round_windows
        .iter()
        .filter(|(start, end)| {
            let slowest = probes
                .iter()
                .filter(|probe| probe.path == "/health")
                .filter(|probe| probe.sent_ms >= *start && probe.sent_ms <= *end)
                .map(|probe| probe.ms)
                .fold(0.0, f64::max);
            slowest >= 0.5 * (end - start)
        })
        .count();
    let report_start = record
        .spans
        .iter()
        .map(|span| span.start_ms)
        .fold(f64::INFINITY, f64::min);
    let report_end = record
        .spans
        .iter()
        .map(|span| span.end_ms)
        .fold(f64::NEG_INFINITY, f64::max);
    let times = |pick: fn(&server::Span) -> f64| {
        let mut times: Vec<f64> = record
            .spans
            .iter()
            .map(|span| pick(span) - origin_ms)
            .collect();
        times.sort_by(f64::total_cmp);
        times
    };
    let report_starts_ms = times(|span| span.start_ms);
    let report_ends_ms = times(|span| span.end_ms);
    let report_ms = record
        .spans
        .iter()
        .map(|span| span.end_ms - span.start_ms)
        .sum::<f64>()
        / record.spans.len() as f64;

    let mut health = Vec::new();
    let mut health_latency = Latencies::default();
    let mut login_max_ms: f64 = 0.0;
    let mut health_failed = 0;
    for probe in probes {
        let ok = probe.status == 200;
        let latency = Duration::from_secs_f64(probe.ms.max(0.0) / 1000.0);
        if probe.path == "/health" {
            health_latency.record(latency);
            health_failed += usize::from(!ok);
            health.push(HealthSample {
                t_ms: probe.sent_ms - origin_ms,
                ms: probe.ms,
                ok,
            });
        } else {
            login_max_ms = login_max_ms.max(probe.ms);
        }
    }
    health.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
    ensure!(
        health_latency.len() >= 10,
        "only {} /health answers",
        health_latency.len()
    );
    let health_stats = health_latency.summary();

    let lag: Vec<LagPoint> = record
        .lag
        .iter()
        .filter(|sample| sample.due_ms >= origin_ms)
        .map(|sample| LagPoint {
            t_ms: sample.due_ms - origin_ms,
            ms: sample.late_ms,
        })
        .collect();
    let mut lag_sorted: Vec<f64> = lag.iter().map(|point| point.ms).collect();
    lag_sorted.sort_by(f64::total_cmp);
    ensure!(!lag_sorted.is_empty(), "the lag probe never woke");

    let summary = VariantSummary {
        runtime: variant.runtime_label(),
        strategy: variant.strategy_label().into(),
        reports: variant.reports,
        rows: config.rows,
        rounds: round_windows.len(),
        stalled_rounds,
        report_start_ms: report_start - origin_ms,
        report_end_ms: report_end - origin_ms,
        report_starts_ms,
        report_ends_ms,
        report_ms,
        report_response_ms: response_ms.iter().copied().fold(f64::INFINITY, f64::min),
        health_count: health_stats.count,
        health_failed,
        health_p50_ms: health_stats.p50_ms,
        health_p99_ms: health_stats.p99_ms,
        health_max_ms: health_stats.max_ms,
        login_max_ms,
        lag_count: lag_sorted.len(),
        lag_p50_ms: percentile(&lag_sorted, 50.0),
        lag_p99_ms: percentile(&lag_sorted, 99.0),
        lag_max_ms: lag_sorted[lag_sorted.len() - 1],
        report_polls: record.report_route.polls,
        report_slow_polls: record.report_route.slow_polls,
        report_slow_poll_ms: record.report_route.slow_poll_ms,
        health_slow_polls: record.health_route.slow_polls,
    };
    Ok(Measured {
        health,
        lag,
        summary,
    })
}
