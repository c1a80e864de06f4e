//! One setup, measured: a fresh server, a fresh prober process, a quiet
//! period, the report request(s), a quiet period again.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use lab_kit::clock::monotonic_ms;

use crate::{
    Config,
    handlers::Offload,
    prober::{ProberArgs, ProberProcess},
    server::{LagServer, ServerSettings},
    setup::HandlerSetup,
    summary::{Measured, summarise},
};

/// One setup: fresh server, fresh prober, quiet, report(s), quiet, numbers.
pub async fn measure(setup: &HandlerSetup, config: &Config) -> Result<Measured> {
    let server = LagServer::start(ServerSettings {
        flavour: setup.flavour,
        offload: setup.offload,
        rows: config.rows,
        chunk_rows: config.chunk_rows,
        rayon_threads: config.rayon_threads,
        lag_interval: Duration::from_millis(config.lag_interval_ms),
        slow_poll: Duration::from_millis(config.slow_poll_ms),
    })
    .await?;
    let origin_ms = monotonic_ms();
    let mut prober = ProberProcess::spawn(
        &config.prober_exe,
        &ProberArgs {
            target: server.addr,
            interval: Duration::from_millis(config.probe_interval_ms),
            login_every: config.login_every,
            max: Duration::from_secs(120),
        },
    )?;
    // The prober must be answering before the report starts, or the chart
    // would have no "before".
    prober
        .wait_for_answers(10, Duration::from_secs(10))
        .await
        .context("waiting for the prober's first answers")?;
    tokio::time::sleep(Duration::from_millis(config.quiet_ms)).await;

    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(120))
        .build()
        .context("building the report client")?;
    let base = format!("http://{}", server.addr);
    let rounds = if setup.repeat_for_race {
        config.race_rounds.max(1)
    } else {
        1
    };
    let mut response_ms = Vec::new();
    let mut round_windows = Vec::new();
    for round in 0..rounds {
        if round > 0 {
            tokio::time::sleep(Duration::from_millis(config.quiet_ms / 2)).await;
        }
        let round_start = monotonic_ms();
        let mut requests = tokio::task::JoinSet::new();
        for _ in 0..setup.reports {
            let (client, base, strategy) = (client.clone(), base.clone(), setup.offload);
            requests.spawn(async move { ask_for_report(&client, &base, strategy).await });
        }
        while let Some(joined) = requests.join_next().await {
            response_ms.push(joined.context("a report request panicked")??);
        }
        round_windows.push((round_start, monotonic_ms()));
    }
    tokio::time::sleep(Duration::from_millis(config.quiet_ms)).await;
    let probes = prober.finish().await?;
    drop(client);
    let record = server.stop().await?;
    summarise(
        setup,
        config,
        origin_ms,
        &probes,
        &record,
        &response_ms,
        &round_windows,
    )
}

// ANCHOR: client
/// Asks for one report and returns how long the client waited for its
/// answer. For the background job: POST, 202 with a Location, then poll it.
async fn ask_for_report(client: &reqwest::Client, base: &str, strategy: Offload) -> Result<f64> {
    let asked = Instant::now();
    if strategy != Offload::BackgroundJob {
        let response = client.get(format!("{base}/report")).send().await?;
        let body = response.error_for_status()?.text().await?;
        ensure!(body.ends_with("bytes\n"), "unexpected report body {body:?}");
        return Ok(asked.elapsed().as_secs_f64() * 1000.0);
    }
    let accepted = client
        .post(format!("{base}/reports"))
        .send()
        .await?
        .error_for_status()?;
    let answered_ms = asked.elapsed().as_secs_f64() * 1000.0;
    ensure!(
        accepted.status() == reqwest::StatusCode::ACCEPTED,
        "expected 202, got {}",
        accepted.status()
    );
    let location = accepted
        .headers()
        .get(reqwest::header::LOCATION)
        .context("a 202 without a Location")?
        .to_str()
        .context("a Location that is not text")?
        .to_string();
    // Bounded polling: a real client would back off; 20 ms keeps the lab short.
    for _ in 0..6000 {
        let status = client.get(format!("{base}{location}")).send().await?;
        if status.status() == reqwest::StatusCode::OK {
            return Ok(answered_ms);
        }
        status.error_for_status()?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("the report job at {location} did not finish within two minutes")
}
// ANCHOR_END: client
