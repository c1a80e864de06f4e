//! The check: serves the piece as `/readyz` in front of the health-checks
//! lab's stand-in database, once with the database answering and once with
//! it hanging, and probes it as a kubelet does: a fresh connection, a 1 s
//! timeout (Kubernetes' default; no time compression here).

use std::{process::ExitCode, sync::Arc, time::Duration};

use anyhow::Result;
use axum::{Router, extract::State, routing::get};
use exercise_kit::{Variant, Verdict, pick_async};
use lab_health_checks::{
    app::ServiceState,
    dependency::{self, SlowWindow},
    production::READINESS,
};
use lab_kit::server::RunningServer;
use tokio::time::Instant;

exercise_kit::exercise!(
    "give the readiness check its own bound, well under the probe's 1 s, and answer 503 when \
     it runs out (or answer from a status a background task keeps up to date)",
);

/// The service's ordinary query timeout, which the readiness check inherits.
const QUERY_LIMIT: Duration = Duration::from_secs(30);
const PROBES: usize = 3;

/// What one kubelet probe got: the status (None: timed out) and the ms it took.
async fn kubelet_probe(client: &reqwest::Client, url: &str) -> (Option<u16>, f64) {
    let started = Instant::now();
    let timeout = Duration::from_millis(READINESS.timeout_ms);
    let status = match client.get(url).timeout(timeout).send().await {
        Ok(response) => Some(response.status().as_u16()),
        Err(_) => None,
    };
    (status, started.elapsed().as_secs_f64() * 1000.0)
}

/// The service in front of `database`, and what `PROBES` probes of it got.
async fn probed(variant: Variant, database: &RunningServer) -> Result<Vec<(Option<u16>, f64)>> {
    let state = Arc::new(ServiceState::new(database.url("/query"), QUERY_LIMIT)?);
    let readyz = move |state: State<Arc<ServiceState>>| {
        pick_async!(
            variant,
            health_checks_probe_timeout::readyz(state),
            solution::readyz(state),
        )
    };
    let app = Router::new()
        .route("/readyz", get(readyz))
        .with_state(state);
    let service = lab_kit::server::spawn_axum(app).await?;
    let client = lab_kit::client::fresh_connection_client("the kubelet's client")?;
    let mut seen = Vec::new();
    for _ in 0..PROBES {
        seen.push(kubelet_probe(&client, &service.url("/readyz")).await);
    }
    Ok(seen)
}

async fn check(variant: Variant) -> Result<Verdict> {
    let now = Instant::now();
    let answering = dependency::start(SlowWindow {
        from: now,
        until: now,
        slow: Duration::ZERO,
    })
    .await?;
    // Every query that arrives in the next minute waits 20 s: a hang.
    let hanging = dependency::start(SlowWindow {
        from: now,
        until: now + Duration::from_secs(60),
        slow: Duration::from_secs(20),
    })
    .await?;

    let up = probed(variant, &answering).await?;
    if let Some((status, ms)) = up.iter().find(|(status, _)| *status != Some(200)) {
        return Ok(Verdict::fail(format!(
            "with the database answering, a readiness probe got {} after {ms:.0} ms instead of \
             200: a healthy pod must be ready",
            status.map_or("no answer".to_string(), |s| s.to_string())
        )));
    }
    let down = probed(variant, &hanging).await?;
    let timed_out = down.iter().filter(|(status, _)| status.is_none()).count();
    let slowest = down.iter().map(|(_, ms)| *ms).fold(0.0, f64::max);
    if timed_out > 0 {
        return Ok(Verdict::fail(format!(
            "with the database hanging, {timed_out} of {PROBES} readiness probes timed out at \
             the probe's 1 s with no answer: the handler waits for the database as long as the \
             {} s query timeout allows, so the kubelet gets a timeout where a 503 would have \
             said why",
            QUERY_LIMIT.as_secs()
        )));
    }
    let unavailable = down
        .iter()
        .filter(|(status, _)| *status == Some(503))
        .count();
    if unavailable < PROBES {
        return Ok(Verdict::fail(format!(
            "with the database hanging, only {unavailable} of {PROBES} readiness probes got a \
             503; the others said the pod was ready to serve requests it cannot answer"
        )));
    }
    Ok(Verdict::pass(format!(
        "with the database answering, {PROBES} of {PROBES} readiness probes got 200; with it \
         hanging, {PROBES} of {PROBES} got a 503 within {slowest:.0} ms, well inside the \
         probe's 1 s timeout"
    )))
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
