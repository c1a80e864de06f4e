//! Server timeouts: what `axum::serve`, hyper with a timer, and a hardened
//! hyper server really do with a connection that is idle, half-sent, stalled
//! or stuck in its handler.
//!
//! One experiment, [`server_defaults`]: every [`StalledClient`] against every
//! [`ServerSetup`], all at once, on 127.0.0.1, with time compressed by
//! [`Config::time_scale`]. In full mode it also watches hyper's
//! own default, unconfigured and uncompressed ([`real_time_default`]). The
//! servers are in [`servers`], the raw-socket clients in [`stalled_client`].
//!
//! Beside it, two parts: [`descriptors`], a server process with a low limit
//! on open files filled by slow clients (the server is [`fd_server`], this
//! binary re-executed), and [`buffering`], a slow upload to `axum::serve`
//! directly and through nginx with `proxy_request_buffering` on and off.

pub mod buffering;
pub mod descriptors;
pub mod fd_server;
pub mod server_defaults;
pub mod servers;
pub mod stalled_client;

use std::{path::PathBuf, time::Duration};

use anyhow::{Context, Result};
use lab_kit::{Lab, Mode, Output, Series, lab::Subcommand};
use serde::{Deserialize, Serialize};

pub use crate::{
    server_defaults::{real_time_default, server_defaults},
    servers::{Hardening, ServerSetup},
    stalled_client::{StalledClient, watch},
};

/// The hardened server's timeouts, in production seconds: the values this
/// chapter recommends, which the doctor's hardened service runs too.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hardened {
    /// The idle timeout of the balancer in front (AWS ALB's default: 60 s).
    pub balancer_idle_s: f64,
    /// Above the balancer's: hyper's header read timer is also its idle timer.
    pub header_read_s: f64,
    pub body_s: f64,
    pub handler_deadline_s: f64,
    /// How long a watch lasts: past the header read timeout.
    pub window_s: f64,
}

pub const HARDENED: Hardened = Hardened {
    balancer_idle_s: 60.0,
    header_read_s: 90.0,
    body_s: 10.0,
    handler_deadline_s: 15.0,
    window_s: 110.0,
};

/// What one run measures. Durations named `*_s` are production seconds; the
/// lab runs them divided by `time_scale`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// Production seconds per lab second (50: a 60 s timeout runs as 1.2 s).
    pub time_scale: f64,
    /// The idle timeout of the balancer the hardened server sits behind
    /// (AWS ALB's default: 60 s); its header read timeout stays above it.
    pub balancer_idle_s: f64,
    /// hyper's default `header_read_timeout` (30 s), set explicitly on the
    /// `hyper-timer` server so that it can be compressed.
    pub hyper_header_read_s: f64,
    /// The hardened server's header read timeout (also its idle timeout).
    pub hardened_header_read_s: f64,
    /// The hardened server's request body timeout.
    pub body_timeout_s: f64,
    /// The hardened server's handler deadline.
    pub handler_deadline_s: f64,
    /// How long the lab watches each connection.
    pub window_s: f64,
    /// Full mode only (0: skip): watch an idle connection to hyper with its
    /// *unconfigured* default, in real time, for this many seconds, so that
    /// one row of the data checks the 30 s default itself, not a compressed
    /// copy of it.
    pub real_default_window_s: f64,
    /// The descriptor part: the soft limit on open files its server sets.
    pub descriptor_limit: u64,
    /// Slow clients that arrive per production second until it is full.
    pub slow_clients_per_s: f64,
    /// How long the slow clients hold on once it is full, production
    /// seconds (full mode: not a whole number of lab seconds, so the release
    /// never meets axum's once-a-second retry head on).
    pub descriptor_hold_s: f64,
    /// The proxy part: how long the slow client takes to send its body.
    pub slow_body_s: f64,
    /// The lab binary, re-executed as the descriptor part's server (not part
    /// of the meta record).
    #[serde(skip_serializing, default = "descriptors::this_binary")]
    pub fd_server_exe: PathBuf,
}

impl Lab for Config {
    const MANIFEST: &str = include_str!("../Cargo.toml");

    const SUBCOMMANDS: &[Subcommand] = &[Subcommand::new(
        crate::fd_server::SUBCOMMAND,
        "a server the descriptors part starts, out of file descriptors",
        crate::fd_server::fd_server_main,
    )];

    fn for_mode(mode: Mode) -> Config {
        Config {
            time_scale: mode.pick(50.0, 10.0),
            balancer_idle_s: HARDENED.balancer_idle_s,
            hyper_header_read_s: 30.0,
            hardened_header_read_s: HARDENED.header_read_s,
            body_timeout_s: HARDENED.body_s,
            handler_deadline_s: HARDENED.handler_deadline_s,
            window_s: HARDENED.window_s,
            real_default_window_s: mode.pick(0.0, 40.0),
            descriptor_limit: 64,
            slow_clients_per_s: 2.0,
            descriptor_hold_s: mode.pick(110.0, 115.0),
            slow_body_s: 20.0,
            fd_server_exe: descriptors::this_binary(),
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
    pub fn lab(&self, production_s: f64) -> Duration {
        Duration::from_secs_f64(production_s / self.time_scale)
    }

    /// Lab milliseconds as production seconds.
    pub fn production_s(&self, lab_ms: f64) -> f64 {
        lab_ms * self.time_scale / 1000.0
    }

    /// The three servers the lab compares, with their timeouts compressed.
    pub fn setups(&self) -> [ServerSetup; 3] {
        [
            ServerSetup::AxumServe,
            ServerSetup::HyperTimer {
                header_read_timeout: self.lab(self.hyper_header_read_s),
            },
            ServerSetup::Hardened(Hardening {
                header_read_timeout: self.lab(self.hardened_header_read_s),
                request_body_timeout: self.lab(self.body_timeout_s),
                handler_deadline: self.lab(self.handler_deadline_s),
            }),
        ]
    }

    /// What a setup was configured with for its idle and header phase,
    /// production seconds; `None` for no timeout at all.
    pub fn configured_s(&self, setup: &ServerSetup) -> Option<f64> {
        match setup {
            ServerSetup::AxumServe => None,
            ServerSetup::HyperTimer { .. } => Some(self.hyper_header_read_s),
            ServerSetup::Hardened(_) => Some(self.hardened_header_read_s),
            // Nothing configured: hyper's own default applies.
            ServerSetup::HyperDefault => None,
        }
    }
}

/// The experiment, as records on `out`.
async fn run(config: &Config, out: &mut Output) -> Result<()> {
    eprintln!(
        "server-timeouts: time compressed {}x (a 60 s timeout runs as {:?}); watching each \
         connection for {} s of production time",
        config.time_scale,
        config.lab(60.0),
        config.window_s
    );
    // Full mode: hyper's real default, uncompressed, watched while the
    // compressed experiment runs (all four only wait on timers and peers).
    let (compressed, real_time, filled, proxied) = tokio::join!(
        server_defaults(config, out),
        real_time_default(config),
        descriptors::descriptors(config),
        buffering::buffering(config),
    );
    compressed.context("measured server defaults")?;
    if let Some(row) = real_time.context("hyper's default idle timeout, in real time")? {
        out.write_summary("hyper-default-real-time/idle", &row)?;
    }
    let (limits, filled) = filled.context("servers out of file descriptors")?;
    out.write_summary("descriptors/lab-process", &limits)?;
    for (server, row) in filled {
        out.write_summary(&server.series(), &row)?;
    }
    for (path, row) in proxied.context("a slow upload through a proxy")? {
        out.write_summary(&path.series(), &row)?;
    }
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
