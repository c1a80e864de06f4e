//! The check: serves the piece behind a compressed balancer timeout and
//! watches an idle connection with the keep-alive lab's probe.

use std::{process::ExitCode, time::Duration};

use anyhow::Result;
use exercise_kit::{Compression, Variant, Verdict};
use lab_keepalive_race::probe::{IdleProbeConfig, probe};

exercise_kit::exercise!(
    "the balancer sends requests, so it must be the side that closes an idle connection: \
     make the backend's idle timeout longer than the balancer's by more than a round trip \
     (65 s or more behind an ALB's 60 s)",
);

/// Time runs 50 times faster than in production, as in the lab's quick
/// mode: the ALB's 60 s is 1.2 s here.
const COMPRESSION: Compression = Compression(50.0);
const BALANCER_IDLE: Duration = Duration::from_millis(1200);
/// The connection must still be open this long after the balancer's
/// timeout: 15 s in production, far more than a round trip.
const MARGIN: Duration = Duration::from_millis(300);

async fn check(variant: Variant) -> Result<Verdict> {
    let settings: fn(Duration) -> hyper::server::conn::http1::Builder = variant.pick(
        keepalive_race_idle_timeout::http1_settings,
        solution::http1_settings,
    );
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
    let server = lab_kit::server::spawn_hyper(settings(BALANCER_IDLE), app).await?;
    let report = probe(&IdleProbeConfig::new(server.addr, BALANCER_IDLE + MARGIN)).await?;
    let balancer_s = COMPRESSION.production_s(BALANCER_IDLE);
    Ok(match report.closed_after_ms {
        Some(ms) => Verdict::fail(format!(
            "the service closed an idle connection after {:.0} s (time compressed {COMPRESSION}x: \
             {ms:.0} ms), not later than the balancer's {balancer_s:.0} s plus a margin; the \
             balancer can send a request on a connection the service is closing, and answer 502",
            COMPRESSION.production_s_of_ms(ms)
        )),
        None => Verdict::pass(format!(
            "an idle connection was still open {:.0} s after the response (time compressed \
             {COMPRESSION}x), past the balancer's {balancer_s:.0} s: the balancer closes first",
            COMPRESSION.production_s_of_ms(report.window_ms)
        )),
    })
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
