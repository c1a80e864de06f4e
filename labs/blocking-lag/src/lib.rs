//! Blocking the runtime: a report handler that does 1.5 million rows of CPU
//! work, measured from outside (a separate prober process hitting /health)
//! and from inside (a lag probe on the server's runtime), on a current_thread
//! runtime, on two workers, and with five ways of moving the work; then the
//! same report read from a database, built in memory or streamed in pages
//! (`streaming`).
//!
//! Each setup gets a fresh server on a runtime of its own (see `server`),
//! a fresh prober process (see `prober`), a short quiet period, the report
//! request(s), a short quiet period again, and then the numbers.

mod handlers;
pub mod measure;
pub mod orders;
pub mod prober;
pub mod report;
pub mod report_server;
pub mod server;
pub mod setup;
pub mod streaming;
pub mod summary;

use std::path::PathBuf;

use anyhow::{Context, Result};
use lab_kit::{Lab, Mode, Output, Series, lab::Subcommand};
use serde::{Deserialize, Serialize};

pub use crate::{
    measure::measure, report_server::Delivery, setup::HandlerSetup, summary::Measured,
};

/// What one run measures.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// Rounds of the setups whose outcome is a race (one report on two
    /// workers: does the other worker get to the I/O driver or not?).
    pub race_rounds: usize,
    /// Threads of the rayon pool in the rayon setup.
    pub rayon_threads: usize,
    /// A poll longer than this is slow for the per-route task monitors (ms).
    pub slow_poll_ms: u64,
    /// The setups run, by name (`HandlerSetup::ALL` has them).
    pub setup_names: Vec<String>,
    /// Rows of the report read from SQLite in the streaming part.
    pub stream_rows: usize,
    /// Rows per page of the streamed report.
    pub page_rows: usize,
    /// The report server's resident memory is read this often (ms).
    pub stream_sample_ms: u64,
    /// The deliveries compared, by name (`Delivery::ALL`); none skips the part.
    pub stream_deliveries: Vec<String>,
    /// The lab binary, re-executed as the prober (not part of the meta
    /// record; after `--set`, this binary).
    #[serde(skip_serializing, default = "this_binary")]
    pub prober_exe: PathBuf,
}

/// This binary: the prober the lab re-executes.
pub fn this_binary() -> PathBuf {
    std::env::current_exe().unwrap_or_default()
}

impl Lab for Config {
    const MANIFEST: &str = include_str!("../Cargo.toml");
    const SUBCOMMANDS: &[Subcommand] = &[
        Subcommand::new(
            prober::SUBCOMMAND,
            "the prober the lab starts",
            prober::prober_main,
        ),
        Subcommand::new(
            report_server::SUBCOMMAND,
            "a report server the lab starts",
            report_server::report_server_main,
        ),
    ];

    /// The settings for a mode; `prober_exe` is this binary (the prober is
    /// the same binary with a hidden subcommand).
    fn for_mode(mode: Mode) -> Config {
        // Quick: about 0.2 s of report on an idle 2-core machine (twice that
        // when others compile), so seven setups fit in the quick budget. Full:
        // the Node article's size, 1.5 million rows.
        let rows = mode.pick(600_000, 1_500_000);
        let quiet_ms = mode.pick(200, 1000);
        let mut config = Config::with_variants(rows, quiet_ms, &HandlerSetup::ALL, this_binary());
        config.race_rounds = mode.pick(4, 12);
        config
    }

    async fn run(&self, out: &mut Output) -> Result<()> {
        run(self, out).await
    }
}

impl Config {
    /// The setups `setup_names` names, in that order.
    pub fn setups(&self) -> Result<Vec<HandlerSetup>> {
        self.setup_names
            .iter()
            .map(|name| {
                HandlerSetup::ALL
                    .into_iter()
                    .find(|setup| setup.name == name)
                    .with_context(|| {
                        let known: Vec<&str> =
                            HandlerSetup::ALL.iter().map(|setup| setup.name).collect();
                        format!(
                            "no setup named {name:?}; the setups are {}",
                            known.join(", ")
                        )
                    })
            })
            .collect()
    }

    /// The same settings for a chosen list of setups and a report size.
    pub fn with_variants(
        rows: usize,
        quiet_ms: u64,
        setups: &[HandlerSetup],
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
            setup_names: setups.iter().map(|setup| setup.name.to_string()).collect(),
            stream_rows: rows,
            page_rows: 5_000,
            stream_sample_ms: 5,
            stream_deliveries: Delivery::ALL
                .iter()
                .map(|delivery| delivery.name().to_string())
                .collect(),
            prober_exe,
        }
    }
}

/// The whole lab: every setup in turn, as records on `out`.
async fn run(config: &Config, out: &mut Output) -> Result<()> {
    for setup in &config.setups()? {
        eprintln!(
            "blocking-lag: {} ({}, {} x {} report)",
            setup.name,
            setup.runtime_label(),
            setup.reports,
            setup.offload_label()
        );
        let measured = measure(setup, config)
            .await
            .with_context(|| format!("setup {}", setup.name))?;
        for sample in &measured.health {
            out.write_sample(&format!("health-{}", setup.series()), sample)?;
        }
        for point in &measured.lag {
            out.write_sample(&format!("lag-{}", setup.series()), point)?;
        }
        out.write_summary(&setup.series(), &measured.summary)?;
    }
    streaming::stream_report(config, out)
        .await
        .context("the report from SQLite")?;
    Ok(())
}

/// The lab binary's `main`; `src/main.rs` only calls it. It lives in the
/// library because the binary crate is where generic code is compiled at
/// opt-level 3 a second time: with `main` in the binary, each lab's binary
/// took 8 to 24 s to compile; with it here, under half a second
/// (ARCHITECTURE.md, "Timings and build profiles").
pub fn main() -> std::process::ExitCode {
    lab_kit::cli::run_lab::<Config>()
}
