//! The check: runs this binary as the server (`__serve --port P
//! --drain-wait-ms N`) under the shutdown-drain lab's probe, which polls
//! `/readyz` every 20 ms like a balancer, keeps traffic flowing, sends
//! SIGTERM, and reports when readiness turned 503 and when the first
//! connection was refused.

use std::{process::ExitCode, time::Duration};

use anyhow::{Context, Result};
use axum::{Router, routing::get};
use exercise_kit::{Compression, Variant, Verdict, pick_async};
use lab_kit::flags::Flags;
use lab_shutdown_drain::probe::{parse_args, probe};
use tokio::net::TcpListener;

exercise_kit::exercise!(
    "the balancer learns only from /readyz: make it answer 503 as soon as SIGTERM arrives, \
     keep serving through the wait, and stop accepting only after it",
);

/// Time is compressed 20x: a 10 s drain wait (two 5 s balancer polls) is
/// 500 ms here, and the probe's balancer polls every 20 ms.
const COMPRESSION: Compression = Compression(20.0);
const DRAIN_WAIT_MS: u64 = 500;

/// `__serve [--solution] --port P --drain-wait-ms N`: the process the probe signals.
async fn serve(variant: Variant, arguments: Vec<String>) -> Result<()> {
    let (mut port, mut drain_wait) = (0u16, Duration::ZERO);
    let mut flags = Flags::new(&arguments).for_what("__serve");
    while let Some(flag) = flags.next_flag()? {
        match flag.name {
            "--port" => port = flag.parse("a port")?,
            "--drain-wait-ms" => drain_wait = Duration::from_millis(flag.parse("milliseconds")?),
            _ => return Err(flag.unknown()),
        }
    }
    let app = Router::new().route("/", get(|| async { "ok\n" })).route(
        "/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_millis(800)).await;
            "done\n"
        }),
    );
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("binding 127.0.0.1:{port}"))?;
    let serving = pick_async!(
        variant,
        shutdown_drain_readiness::serve(listener, app, drain_wait),
        solution::serve(listener, app, drain_wait),
    );
    serving.await.context("serving")
}

async fn check(variant: Variant) -> Result<Verdict> {
    let port = lab_kit::net::free_loopback_port()?.to_string();
    let wait = DRAIN_WAIT_MS.to_string();
    let server =
        exercise_kit::serve_command(variant, &["--port", &port, "--drain-wait-ms", &wait])?;
    let probe_flags = ["--port", &port, "--slow-path", "/slow", "--in-flight", "2"];
    let probe_flags = probe_flags
        .into_iter()
        .chain(["--grace-ms", "3000", "--warmup-ms", "300"]);
    let arguments: Vec<String> = probe_flags
        .map(String::from)
        .chain(["--".to_string()])
        .chain(server)
        .collect();
    let report = probe(&parse_args(&arguments)?).await?;

    let (ready_ms, refused_ms) = (report.readiness_503_after_ms, report.refused_after_ms);
    let compressed = format!("time compressed {COMPRESSION}x");
    if ready_ms < 0.0 || (refused_ms >= 0.0 && ready_ms > refused_ms) {
        return Ok(Verdict::fail(format!(
            "connections were refused {:.1} s after SIGTERM ({compressed}: {refused_ms:.0} ms) \
             without a 503 from /readyz first, and {} requests were refused: the balancer was \
             told nothing during the wait and found out only by failing requests",
            COMPRESSION.production_s_of_ms(refused_ms),
            report.after_sigterm_refused
        )));
    }
    // A poll period is the least the balancer needs between the 503 and the close.
    let warned_ms = if refused_ms < 0.0 {
        f64::INFINITY
    } else {
        refused_ms - ready_ms
    };
    if warned_ms < DRAIN_WAIT_MS as f64 / 2.0 {
        return Ok(Verdict::fail(format!(
            "/readyz turned 503 only {:.1} s before the first refused connection ({compressed}: \
             {warned_ms:.0} ms), less than the balancer needs to poll and leave",
            COMPRESSION.production_s_of_ms(warned_ms)
        )));
    }
    if !report.clean {
        return Ok(Verdict::fail(format!(
            "readiness turned 503 first, but the drain was not clean: {} of {} requests in \
             flight completed, exit {} after {:.0} ms",
            report.in_flight_completed, report.in_flight, report.exit, report.time_to_exit_ms
        )));
    }
    Ok(Verdict::pass(format!(
        "/readyz answered 503 {ready_ms:.0} ms after SIGTERM and connections were refused only \
         {:.1} s later ({compressed}: {warned_ms:.0} ms), time for the balancer to leave; {} of \
         {} requests in flight completed and the process exited 0",
        COMPRESSION.production_s_of_ms(warned_ms),
        report.in_flight_completed,
        report.in_flight
    )))
}

fn main() -> ExitCode {
    exercise_kit::main_with_server(EXERCISE, check, serve)
}
