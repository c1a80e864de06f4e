//! The check: runs this binary as the server (`__serve --port P`), with the
//! piece's `serve` in its `main`, under the shutdown-drain lab's probe: the
//! probe drives traffic, starts a few slow requests, sends SIGTERM and
//! watches what those requests and the process do.

use std::{process::ExitCode, time::Duration};

use anyhow::{Context, Result, bail};
use axum::{Router, routing::get};
use exercise_kit::{Variant, Verdict, pick_async};
use lab_shutdown_drain::probe::{ShutdownProbeConfig, probe};
use tokio::net::TcpListener;

exercise_kit::exercise!(
    "SIGTERM should not drop the server future: hand the signal to axum's graceful shutdown \
     (`with_graceful_shutdown`) so it stops accepting and waits for the requests in flight",
);

/// How long `/slow` works: SIGTERM arrives while it runs.
const SLOW: Duration = Duration::from_millis(1000);
/// The orchestrator's grace period, compressed 10x: 30 s is 3 s here.
const GRACE: Duration = Duration::from_secs(3);
const IN_FLIGHT: usize = 3;

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "ok\n" }))
        .route("/readyz", get(|| async { "ready\n" }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(SLOW).await;
                "done\n"
            }),
        )
}

/// The server mode the probe starts: `__serve [--solution] --port P`.
async fn serve(variant: Variant, arguments: Vec<String>) -> Result<()> {
    let port: u16 = match arguments.as_slice() {
        [flag, port] if flag == "--port" => port.parse().context("--port is not a port")?,
        _ => bail!("usage: __serve [--solution] --port P"),
    };
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("binding 127.0.0.1:{port}"))?;
    let serving = pick_async!(
        variant,
        shutdown_drain_graceful::serve(listener, app()),
        solution::serve(listener, app()),
    );
    serving.await.context("serving")
}

async fn check(variant: Variant) -> Result<Verdict> {
    let port = lab_kit::net::free_loopback_port()?;
    let port_text = port.to_string();
    let config = ShutdownProbeConfig {
        port,
        path: "/".into(),
        ready_path: "/readyz".into(),
        slow_path: "/slow".into(),
        in_flight: IN_FLIGHT,
        grace: GRACE,
        start_timeout: Duration::from_secs(5),
        warmup: Duration::from_millis(300),
        interval: Duration::from_millis(20),
        command: exercise_kit::serve_command(variant, &["--port", &port_text])?,
    };
    let report = probe(&config).await?;
    let slow_ms = SLOW.as_millis();
    let grace_ms = GRACE.as_millis();
    let exit_ms = report.time_to_exit_ms;
    if report.in_flight_failed > 0 {
        return Ok(Verdict::fail(format!(
            "{} of {} requests in flight at SIGTERM were cut (each needed {slow_ms} ms; the \
             process ended, exit {}, {exit_ms:.0} ms after SIGTERM without waiting for them): \
             behind a balancer each of them is a 502",
            report.in_flight_failed, report.in_flight, report.exit
        )));
    }
    if report.killed_after_grace || report.exit_code != 0 {
        return Ok(Verdict::fail(format!(
            "every request in flight completed, but the process did not exit 0 within the \
             {grace_ms} ms grace period (exit {}, {exit_ms:.0} ms after SIGTERM{})",
            report.exit,
            if report.killed_after_grace {
                ", killed with SIGKILL"
            } else {
                ""
            }
        )));
    }
    Ok(Verdict::pass(format!(
        "all {} requests in flight at SIGTERM completed (each needed {slow_ms} ms) and the \
         process exited 0 {exit_ms:.0} ms after SIGTERM, within the {grace_ms} ms grace period \
         (30 s in production, compressed 10x)",
        report.in_flight
    )))
}

fn main() -> ExitCode {
    exercise_kit::main_with_server(EXERCISE, check, serve)
}
