//! Keep-alive behind a load balancer: who closes an idle connection first,
//! and the 502 that follows when the backend does.
//!
//! Three experiments, all on 127.0.0.1, with time compressed by
//! [`Config::time_scale`] (production seconds divided by the scale
//! are the lab's seconds), one module each:
//!
//! 1. [`who_closes_first`]: a naive client reuses a connection after a gap.
//! 2. [`day_and_night`]: Poisson traffic through a balancer ([`balancer`])
//!    with a link delay ([`link_delay`]), backend idle timeout below and above
//!    the balancer's; the balancer's access log ([`access_log`]) in ALB's
//!    field order.
//! 3. [`reqwest_race`]: the same race from a Rust client's pool.
//!
//! A fourth, the probe, is a subcommand ([`probe`]). What servers do with
//! slow and stuck clients is the `server-timeouts` lab.

pub mod access_log;
pub mod backend;
pub mod balancer;
pub mod config;
pub mod day_and_night;
pub mod link_delay;
pub mod probe;
pub mod reqwest_race;
pub mod who_closes_first;
pub mod wire;

use anyhow::{Context, Result};
use lab_kit::{Output, Series};

pub use crate::{
    config::Config,
    day_and_night::{Case, day_and_night, totals},
    reqwest_race::reqwest_race,
    who_closes_first::{Reuse, reuse_after, who_closes_first},
};

/// Every experiment, as records on `out`.
async fn run(config: &Config, out: &mut Output) -> Result<()> {
    eprintln!(
        "keepalive-race: time compressed {}x (a 60 s timeout runs as {:?})",
        config.time_scale,
        config.lab(60.0)
    );
    // The close times first, on a quiet machine; then the two races, which
    // only wait on timers, side by side, each writing into its own buffer,
    // so the records go out in a fixed order.
    who_closes_first(config, out)
        .await
        .context("who closes first")?;
    eprintln!(
        "keepalive-race: day and night, {} rates x 2 backends, {} s each",
        config.rates_per_s.len(),
        config.traffic_s
    );
    let mut reqwest_records = Output::collect();
    let (cases, reqwest) = tokio::join!(
        day_and_night(config),
        reqwest_race(config, &mut reqwest_records),
    );
    let cases = cases.context("day and night")?;
    reqwest.context("reqwest")?;
    for (case, points) in &cases {
        let series = case.series();
        for point in points {
            out.write_sample(&series, point)?;
        }
        let totals = totals(config, *case, points);
        eprintln!(
            "keepalive-race: {series}: {} requests, {} answered 502",
            totals.requests, totals.bad_gateway
        );
        out.write_summary(&series, &totals)?;
    }
    // One line of each kind from the balancer's access log, in ALB's format.
    for example in day_and_night::log_examples(&cases) {
        out.write_sample("day-night/access-log", &example)?;
    }
    out.append(&reqwest_records)?;
    Ok(())
}

/// Runs futures concurrently, each as its own task, and returns their
/// outputs in order.
pub(crate) async fn join_all<F>(items: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = items.map(tokio::spawn).collect();
    let mut outputs = Vec::with_capacity(handles.len());
    for handle in handles {
        outputs.push(handle.await.expect("a lab task panicked"));
    }
    outputs
}

/// The lab binary's `main`; `src/main.rs` only calls it. It lives in the
/// library because the binary crate is where generic code is compiled at
/// opt-level 3 a second time: with `main` in the binary, each lab's binary
/// took 8 to 24 s to compile; with it here, under half a second
/// (ARCHITECTURE.md, "Timings and build profiles").
pub fn main() -> std::process::ExitCode {
    lab_kit::cli::run_lab::<Config>()
}
