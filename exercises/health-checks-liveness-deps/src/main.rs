//! The check: serves the piece's routes next to the health-checks lab's
//! stand-in database; asks both endpoints once while the database is up,
//! then stops the database and runs the lab's kubelet prober on `/livez`
//! (liveness) and `/readyz` (readiness) at once, with Kubernetes' default
//! timings compressed 20x.

use std::{process::ExitCode, sync::Arc, time::Duration};

use anyhow::{Context, Result};
use axum::Router;
use exercise_kit::{Variant, Verdict};
use lab_health_checks::{
    app::ServiceState,
    dependency::{self, SlowWindow},
    kubelet::{KubeletProbe, ProbeKind, run_prober},
    production,
};
use tokio::time::Instant;

exercise_kit::exercise!(
    "liveness must not depend on anything outside the process: let /livez answer from the \
     process alone and keep the database check for /readyz",
);

/// 10 s liveness periods are 500 ms here, 1 s timeouts 50 ms.
const COMPRESSION: u64 = 20;
/// How long the prober watches the pod with the database down.
const OUTAGE: Duration = Duration::from_millis(1600);

fn probe(kind: ProbeKind, path: &'static str) -> KubeletProbe {
    let spec = match kind {
        ProbeKind::Liveness => production::LIVENESS,
        ProbeKind::Readiness => production::READINESS,
    };
    spec.probe(kind, path, COMPRESSION)
}

async fn status(client: &reqwest::Client, url: &str) -> u16 {
    match client.get(url).timeout(Duration::from_secs(2)).send().await {
        Ok(response) => response.status().as_u16(),
        Err(_) => 0,
    }
}

async fn check(variant: Variant) -> Result<Verdict> {
    let routes: fn(Arc<ServiceState>) -> Router = variant.pick(
        health_checks_liveness_deps::health_routes,
        solution::health_routes,
    );
    // The database: the lab's dependency, never slow; stopped below.
    let now = Instant::now();
    let never_slow = SlowWindow {
        from: now,
        until: now,
        slow: Duration::ZERO,
    };
    let database = dependency::start(never_slow).await?;
    let state = ServiceState::new(database.url("/query"), Duration::from_secs(1))?;
    let service = lab_kit::server::spawn_axum(routes(Arc::new(state))).await?;
    let client = lab_kit::client::fresh_connection_client("the check's client")?;

    let (live, ready) = (
        status(&client, &service.url("/livez")).await,
        status(&client, &service.url("/readyz")).await,
    );
    if (live, ready) != (200, 200) {
        return Ok(Verdict::fail(format!(
            "with the database up, /livez answered {live} and /readyz {ready} (0: no answer): \
             a healthy pod must pass both"
        )));
    }

    database
        .stop(Duration::from_secs(1))
        .await
        .context("stopping the database")?;
    let start = Instant::now();
    let until = start + OUTAGE;
    let base = service.url("");
    let liveness = run_prober(
        probe(ProbeKind::Liveness, "/livez"),
        base.clone(),
        start,
        until,
    );
    let readiness = run_prober(probe(ProbeKind::Readiness, "/readyz"), base, start, until);
    let (liveness, readiness) = tokio::join!(liveness, readiness);
    let (liveness, readiness) = (liveness?, readiness?);

    let outage_s = (OUTAGE.as_millis() as u64 * COMPRESSION) as f64 / 1000.0;
    let live_failed = liveness.attempts.iter().filter(|a| !a.passed).count();
    let ready_failed = readiness.attempts.iter().filter(|a| !a.passed).count();
    let left_rotation = readiness.routing_changes.iter().any(|(_, routed)| !routed);
    let restarts = liveness.restarts_ms.len();
    if restarts > 0 {
        return Ok(Verdict::fail(format!(
            "with the database down, /livez failed {live_failed} of {} liveness probes and the \
             kubelet would have restarted this healthy process {restarts} time(s) in {outage_s:.0} \
             s (time compressed {COMPRESSION}x): every pod sharing the database restarts, and no \
             restart brings the database back",
            liveness.attempts.len()
        )));
    }
    if !left_rotation {
        return Ok(Verdict::fail(format!(
            "with the database down, /readyz failed only {ready_failed} of {} readiness probes \
             and the pod never left rotation: the balancer kept sending it requests it could \
             not serve",
            readiness.attempts.len()
        )));
    }
    Ok(Verdict::pass(format!(
        "with the database up both endpoints answered 200; with it down for {outage_s:.0} s \
         (time compressed {COMPRESSION}x) /livez failed {live_failed} of {} liveness probes and \
         caused no restart, while /readyz failed {ready_failed} of {} readiness probes and took \
         the pod out of rotation",
        liveness.attempts.len(),
        readiness.attempts.len()
    )))
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
