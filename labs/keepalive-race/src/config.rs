//! What one run of the keepalive-race lab measures, in quick and full mode,
//! and the compressed clock every experiment runs on.

use std::time::Duration;

use anyhow::Result;
use lab_kit::{Lab, Mode, Output, lab::Subcommand};
use serde::{Deserialize, Serialize};

use crate::backend::BackendKind;

/// What one run measures. Durations named `*_s` are production seconds; the
/// lab runs them divided by `time_scale`. `link_delay_ms`, the traffic rates
/// and `traffic_s` are the lab's own clock.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// Production seconds per lab second (50: a 60 s timeout runs as 1.2 s).
    pub time_scale: f64,
    /// The balancer's idle timeout (AWS ALB's default: 60 s).
    pub balancer_idle_s: f64,
    /// hyper's default `header_read_timeout` (30 s), which with a timer is
    /// also its idle timeout: the "below the balancer" backend.
    pub backend_below_idle_s: f64,
    /// The "above the balancer" backend's idle timeout.
    pub backend_above_idle_s: f64,
    /// How long the close-time probe watches each idle connection.
    pub window_s: f64,
    /// One-way delay of the link between balancer and backend, lab time.
    pub link_delay_ms: f64,
    /// The gaps of the naive client, as multiples of the backend's idle timeout.
    pub gap_factors: Vec<f64>,
    /// Request rates of the day-and-night traffic, per lab second.
    pub rates_per_s: Vec<f64>,
    /// How long each rate runs, lab seconds.
    pub traffic_s: f64,
    /// Rates up to this one (per lab second) count as "night": connections
    /// sit idle for about the backend's idle timeout between requests.
    pub night_rate_limit: f64,
    /// How many independent stacks run each night rate at once.
    pub night_copies: usize,
}

/// Day-and-night rates in quick mode, requests per lab second.
const QUICK_RATES: [f64; 12] = [
    0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0, 32.0, 64.0, 128.0,
];

impl Lab for Config {
    const MANIFEST: &str = include_str!("../Cargo.toml");

    const SUBCOMMANDS: &[Subcommand] = &[Subcommand::new(
        "probe",
        "when does any HTTP/1.1 server close an idle connection (probe --help)",
        crate::probe::probe_main,
    )];

    fn for_mode(mode: Mode) -> Config {
        // Why these numbers (the 502 test must pass 20 runs out of 20):
        //
        // Through the balancer, a request is lost when it leaves after the
        // backend closed the idle connection but before that FIN has crossed
        // the link: a window of two one-way delays (2 x 120 ms) per idle
        // close. With Poisson traffic at rate r and a backend idle timeout I,
        // a gap lands in that window with probability about
        // exp(-r*I) * (1 - exp(-2*d*r)). In quick mode (I = 0.6 s, 7 s per
        // rate, three copies of each rate up to 8/s) those rates expect about
        // 27 such gaps in total, so the chance of seeing no 502 at all is
        // about exp(-27): never, in practice. (A reference run saw 25 with
        // one copy, more than this estimate: a pool with several connections
        // loses some of its spare ones too.)
        //
        // The "above" backend must never lose one: the balancer stops using a
        // connection after 60 s idle (1.2 s here), and the backend closes it
        // after 90 s (1.8 s), counted from a moment one link delay earlier.
        // A loss needs 1.2 s + 2 x 0.12 s to reach 1.8 s: 360 ms of slack, far
        // more than the scheduling hiccups of a busy 2-core machine.
        // Full mode is ten times slower than quick: every timeout five times
        // longer in lab seconds, the link delay with it, rates five times lower.
        Config {
            time_scale: mode.pick(50.0, 10.0),
            balancer_idle_s: 60.0,
            backend_below_idle_s: 30.0,
            backend_above_idle_s: 90.0,
            window_s: 110.0,
            link_delay_ms: mode.pick(120.0, 600.0),
            gap_factors: vec![0.25, 0.5, 0.75, 0.9, 0.95, 1.05, 1.1, 1.25, 1.5, 2.0],
            rates_per_s: QUICK_RATES
                .iter()
                .map(|rate| rate / mode.pick(1.0, 5.0))
                .collect(),
            traffic_s: mode.pick(7.0, 60.0),
            night_rate_limit: mode.pick(8.0, 8.0 / 5.0),
            night_copies: 3,
        }
    }

    fn time_scale(&self) -> f64 {
        self.time_scale
    }

    async fn run(&self, out: &mut Output) -> Result<()> {
        crate::run(self, out).await
    }
}

impl Config {
    /// A production duration on the lab's clock.
    pub fn lab(&self, production_s: f64) -> Duration {
        Duration::from_secs_f64(production_s / self.time_scale)
    }

    pub fn link_delay(&self) -> Duration {
        Duration::from_secs_f64(self.link_delay_ms / 1000.0)
    }

    /// The "below" backend: hyper with its default 30 s, compressed.
    pub fn hyper_below(&self) -> BackendKind {
        BackendKind::HyperTimer {
            header_read_timeout: self.lab(self.backend_below_idle_s),
        }
    }

    /// Lab milliseconds as production seconds.
    pub fn production_s(&self, lab_ms: f64) -> f64 {
        lab_ms * self.time_scale / 1000.0
    }
}
