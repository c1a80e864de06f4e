//! Client timeouts: what a `reqwest::Client` does with each failure shape of
//! a downstream under each timeout knob, the reused-connection trap behind a
//! tunnel, a reverse proxy with a two-phase timeout, and the defaults of the
//! Rust client stack, measured.
//!
//! One module per experiment; everything runs on 127.0.0.1 with ports the
//! kernel picks, on a clock compressed by `Config::time_scale`.

pub mod check;
pub mod cost;
pub mod cost_client;
pub mod dead_peer;
pub mod defaults;
pub mod downstream;
pub mod grid;
pub mod proxy;
pub mod reuse;
pub mod tunnel;
pub mod two_phase;

use std::{path::PathBuf, time::Duration};

use anyhow::{Context, Result};
use lab_kit::{Lab, Mode, Output, lab::Subcommand};
use serde::{Deserialize, Serialize};

use crate::{downstream::Behaviour, two_phase::TwoPhase};

/// What one run measures. Every `_s` field is production seconds; the lab
/// runs them divided by `time_scale`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// How much faster than production the lab's clock runs.
    pub time_scale: f64,
    pub connect_timeout_s: f64,
    pub read_timeout_s: f64,
    pub total_timeout_s: f64,
    /// The two-phase timeout: to the response head, then between chunks.
    pub ttfb_timeout_s: f64,
    pub body_idle_s: f64,
    /// The lab's own bound on any one request: past it, "still waiting".
    pub bound_s: f64,
    /// Gap between two bytes of the trickling downstream.
    pub trickle_every_s: f64,
    /// Bytes of every response body.
    pub body_bytes: usize,
    /// Bytes of the request body sent to the downstream that never reads:
    /// more than the kernel buffers on both ends hold, so the client's write
    /// blocks. Every other request carries 64 bytes.
    pub request_body_bytes: usize,
    /// The pool idle timeout the defaults section sets, to see the reaper.
    pub pool_idle_probe_s: f64,
    /// How long the defaults section waits, in real seconds (a library's
    /// default does not know about the lab's compressed clock).
    pub defaults_bound_real_s: f64,
    /// HTTP/2 PING keepalive: a PING this often, and how long to wait for
    /// its answer.
    pub h2_ping_interval_s: f64,
    pub h2_ping_timeout_s: f64,
    /// How long the dead-peer watchers watch, in real seconds: longer than
    /// the kernel's shortest TCP keepalive could take to give up (1 s idle
    /// plus 3 probes 1 s apart).
    pub dead_peer_watch_real_s: f64,
    /// The cost part runs in real time (memory does not compress): calls
    /// per second to a provider that never answers, for how long, the
    /// timeout and the bulkhead's limit it compares, and how often the
    /// client looks at itself.
    pub cost_rate_per_s: f64,
    pub cost_run_real_s: f64,
    pub cost_timeout_real_s: f64,
    pub cost_bulkhead_limit: usize,
    pub cost_every_ms: u64,
    /// The lab binary, re-executed as the cost part's client (not part of
    /// the meta record).
    #[serde(skip_serializing, default = "this_binary")]
    pub cost_exe: PathBuf,
}

/// The running binary: the lab's, which re-executes itself as the cost
/// part's client (a test sets the lab binary's path instead).
pub fn this_binary() -> PathBuf {
    std::env::current_exe().unwrap_or_default()
}

impl Lab for Config {
    const MANIFEST: &str = include_str!("../Cargo.toml");

    const SUBCOMMANDS: &[Subcommand] = &[
        Subcommand::new(
            "check",
            "one GET to any server with the two-phase timeout (check --help)",
            crate::check::check_main,
        ),
        Subcommand::new(
            crate::cost_client::SUBCOMMAND,
            "a client process of the cost part",
            crate::cost_client::cost_main,
        ),
    ];

    fn for_mode(mode: Mode) -> Config {
        Config {
            time_scale: mode.pick(50.0, 10.0),
            connect_timeout_s: 2.0,
            read_timeout_s: 10.0,
            total_timeout_s: 30.0,
            ttfb_timeout_s: 8.0,
            body_idle_s: 15.0,
            bound_s: 60.0,
            trickle_every_s: 2.0,
            body_bytes: 64,
            request_body_bytes: 8 * 1024 * 1024,
            pool_idle_probe_s: 15.0,
            defaults_bound_real_s: mode.pick(3.0, 30.0),
            h2_ping_interval_s: 10.0,
            h2_ping_timeout_s: 5.0,
            dead_peer_watch_real_s: mode.pick(5.0, 10.0),
            cost_rate_per_s: 100.0,
            cost_run_real_s: mode.pick(4.0, 10.0),
            cost_timeout_real_s: 2.0,
            cost_bulkhead_limit: 20,
            cost_every_ms: 100,
            cost_exe: this_binary(),
        }
    }

    fn time_scale(&self) -> f64 {
        self.time_scale
    }

    async fn run(&self, out: &mut Output) -> Result<()> {
        run(self, out).await
    }
}

impl Config {
    /// A production duration on the lab's clock.
    pub fn lab(&self, production_seconds: f64) -> Duration {
        Duration::from_secs_f64(production_seconds / self.time_scale)
    }

    /// Lab milliseconds scaled back to production seconds.
    pub fn production_s(&self, lab: Duration) -> f64 {
        lab.as_secs_f64() * self.time_scale
    }

    pub fn two_phase(&self) -> TwoPhase {
        TwoPhase {
            ttfb: self.lab(self.ttfb_timeout_s),
            body_idle: self.lab(self.body_idle_s),
        }
    }

    pub fn behaviour(&self) -> Behaviour {
        Behaviour {
            body_bytes: self.body_bytes,
            trickle_every: self.lab(self.trickle_every_s),
        }
    }
}

/// The timeouts themselves, as one summary record: the chart marks them.
#[derive(Debug, Clone, Serialize)]
pub struct Timeouts {
    pub connect_s: f64,
    pub read_s: f64,
    pub total_s: f64,
    pub ttfb_s: f64,
    pub body_idle_s: f64,
    pub bound_s: f64,
    pub time_scale: f64,
}

/// The whole lab, as records on `out`.
async fn run(config: &Config, out: &mut Output) -> Result<()> {
    out.write_summary(
        "timeouts",
        &Timeouts {
            connect_s: config.connect_timeout_s,
            read_s: config.read_timeout_s,
            total_s: config.total_timeout_s,
            ttfb_s: config.ttfb_timeout_s,
            body_idle_s: config.body_idle_s,
            bound_s: config.bound_s,
            time_scale: config.time_scale,
        },
    )?;
    eprintln!("client-timeouts: the grid (7 shapes x 5 settings, side by side)");
    for cell in grid::run_grid(config).await.context("the grid")? {
        out.write_sample(&format!("grid/{}", cell.setting), &cell)?;
        out.write_summary(&format!("cell/{}/{}", cell.shape, cell.setting), &cell)?;
    }
    eprintln!("client-timeouts: the four-step check behind a tunnel");
    reuse::run_checks(config, out)
        .await
        .context("the reused-connection check")?;
    eprintln!("client-timeouts: the reverse proxy");
    proxy::run_proxy(config, out)
        .await
        .context("the reverse proxy")?;
    eprintln!(
        "client-timeouts: the defaults, dead peers on idle connections, and the cost of \
         waiting ({} s of calls to a hung provider, real time)",
        config.cost_run_real_s
    );
    // All three wait on real timers: they run side by side, the last two
    // into buffers of their own, copied after.
    let (mut dead_peer_out, mut cost_out) = (Output::collect(), Output::collect());
    let (defaults, dead_peer, cost) = tokio::join!(
        defaults::run_defaults(config, out),
        dead_peer::run_dead_peer(config, &mut dead_peer_out),
        cost::run_cost(config, &mut cost_out),
    );
    defaults.context("the defaults")?;
    dead_peer.context("dead peers on idle connections")?;
    cost.context("the cost of waiting")?;
    for record in dead_peer_out.records().iter().chain(cost_out.records()) {
        match record {
            lab_kit::Record::Summary(point) => out.write_summary(&point.series, &point.values)?,
            lab_kit::Record::Sample(point) => out.write_sample(&point.series, &point.values)?,
            _ => {}
        }
    }
    Ok(())
}

/// Milliseconds of a duration, for records.
pub fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// The lab binary's `main`; `src/main.rs` only calls it. It lives in the
/// library because the binary crate is where generic code is compiled at
/// opt-level 3 a second time: with `main` in the binary, each lab's binary
/// took 8 to 24 s to compile; with it here, under half a second
/// (ARCHITECTURE.md, "Timings and build profiles").
pub fn main() -> std::process::ExitCode {
    lab_kit::cli::run_lab::<Config>()
}
