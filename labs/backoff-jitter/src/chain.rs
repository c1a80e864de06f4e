//! Retry amplification: a caller, a chain of services, and a dependency that
//! is down. When every hop makes three attempts (the first try and two
//! retries), the dependency sees 3^hops requests for one user call; when only
//! the edge retries, it sees three. In general (retries + 1)^hops: the base is
//! the attempts per hop, not the retries.

use std::{sync::Arc, time::Duration};

use anyhow::{Context, Result};
use axum::{Router, extract::State, http::StatusCode, routing::get};
use backoff_sim::Strategy;
use lab_kit::{Output, Series, server::RunningServer, server::spawn_axum};
use seeded_rng::SplitMix64;
use serde::Serialize;

use crate::{
    Config,
    flaky::{self, FlakyConfig, Recorder},
    live::client,
    policy::{AttemptOutcome, RetryPolicy, send_with_retries},
};

lab_kit::series! {
    /// Where retries happen in the chain.
    pub enum RetryAt {
        /// Every hop: the caller and each service.
        EveryLayer => "chain-every-layer",
        /// Only the caller at the edge; services pass failures straight up.
        EdgeOnly => "chain-edge-only",
    }
}

fn hop_policy(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts: attempts,
        per_attempt_timeout: Duration::from_secs(2),
        total_deadline: Duration::from_secs(10),
        base: Duration::from_millis(1),
        cap: Duration::from_millis(1),
        // No sleep between attempts: the count is the point, and it keeps the
        // lab fast. Backoff changes when the calls arrive, not how many.
        strategy: Strategy::None,
        honour_retry_after: false,
        refuse_waits_past_deadline: true,
        budget: None,
    }
}

#[derive(Clone)]
struct Hop {
    client: reqwest::Client,
    next_url: String,
    policy: RetryPolicy,
}

// ANCHOR: hop
/// A service in the middle: call the next hop under this hop's policy and
/// answer with what came back (a 503 stays a 503; an error becomes a 502).
async fn forward(State(hop): State<Arc<Hop>>) -> StatusCode {
    let Ok(request) = hop.client.get(&hop.next_url).build() else {
        return StatusCode::INTERNAL_SERVER_ERROR;
    };
    let mut rng = SplitMix64::new(1);
    let report = send_with_retries(&hop.client, request, &hop.policy, &mut rng).await;
    match report.last {
        AttemptOutcome::Status(code) => {
            StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY)
        }
        _ => StatusCode::BAD_GATEWAY,
    }
}
// ANCHOR_END: hop

/// One point of the amplification chart.
#[derive(Debug, Clone, Serialize)]
pub struct ChainPoint {
    /// Hops that may retry: the caller plus the services in between.
    pub hops: u32,
    pub services: u32,
    /// Attempts each retrying hop makes: the first try plus its retries.
    pub attempts_per_hop: u32,
    pub retries_per_hop: u32,
    /// Requests the failing dependency received for one user call.
    pub dependency_calls: u64,
    /// attempts_per_hop ^ hops, what theory predicts for every-layer retries.
    pub predicted: u64,
}

/// The deepest chain of the run, both ways, for the chapter's prose.
#[derive(Debug, Clone, Serialize)]
pub struct ChainSummary {
    pub hops: u32,
    pub attempts_per_hop: u32,
    pub retries_per_hop: u32,
    /// Requests the dependency received when every hop retried.
    pub every_layer_calls: u64,
    /// Requests the dependency received when only the edge retried.
    pub edge_only_calls: u64,
}

/// The series of the [`ChainSummary`] record.
pub const SUMMARY_SERIES: &str = "chain";

/// Builds `services` forwarding services in front of a dependency that is
/// always down, sends one call from the edge, and counts what reached it.
pub async fn measure(services: u32, attempts: u32, retry_at: RetryAt) -> Result<ChainPoint> {
    let recorder = Recorder::new(FlakyConfig {
        outage: Duration::from_secs(3600),
        ..FlakyConfig::default()
    });
    let dependency = spawn_axum(flaky::app(Arc::clone(&recorder))).await?;
    let mut next_url = dependency.url("/item");
    let mut running: Vec<RunningServer> = Vec::new();
    let http = client()?;
    let inner_attempts = match retry_at {
        RetryAt::EveryLayer => attempts,
        RetryAt::EdgeOnly => 1,
    };
    for _ in 0..services {
        let hop = Arc::new(Hop {
            client: http.clone(),
            next_url: next_url.clone(),
            policy: hop_policy(inner_attempts),
        });
        let app = Router::new().route("/item", get(forward)).with_state(hop);
        let server = spawn_axum(app).await?;
        next_url = server.url("/item");
        running.push(server);
    }
    let request = http
        .get(&next_url)
        .build()
        .context("building the edge request")?;
    let mut rng = SplitMix64::new(2);
    let report = send_with_retries(&http, request, &hop_policy(attempts), &mut rng).await;
    let dependency_calls = recorder.arrivals().len() as u64;
    anyhow::ensure!(
        report.attempts == attempts,
        "the edge made {} attempts, expected {attempts}",
        report.attempts
    );
    for server in running.into_iter().rev() {
        server.stop(Duration::from_millis(500)).await?;
    }
    dependency.stop(Duration::from_millis(500)).await?;
    Ok(ChainPoint {
        hops: services + 1,
        services,
        attempts_per_hop: attempts,
        retries_per_hop: attempts - 1,
        dependency_calls,
        predicted: u64::from(attempts).pow(services + 1),
    })
}

/// Chains of 0 to `chain_depth - 1` services, retries at every layer and at the edge only.
/// Ends with one summary of the deepest chain.
pub async fn amplification(config: &Config, out: &mut Output) -> Result<()> {
    let mut deepest = Vec::new();
    for retry_at in [RetryAt::EveryLayer, RetryAt::EdgeOnly] {
        let mut last = None;
        for services in 0..config.chain_depth {
            eprintln!(
                "backoff-jitter: chain of {services} services, {}",
                retry_at.series()
            );
            let point = measure(services, config.chain_attempts, retry_at)
                .await
                .with_context(|| format!("a chain of {services} services"))?;
            out.write_sample(&retry_at.series(), &point)?;
            last = Some(point);
        }
        deepest.push(last.context("a chain depth of at least one")?);
    }
    let [every_layer, edge_only] = deepest.as_slice() else {
        anyhow::bail!("expected one deepest chain per retry placement");
    };
    out.write_summary(
        SUMMARY_SERIES,
        &ChainSummary {
            hops: every_layer.hops,
            attempts_per_hop: every_layer.attempts_per_hop,
            retries_per_hop: every_layer.retries_per_hop,
            every_layer_calls: every_layer.dependency_calls,
            edge_only_calls: edge_only.dependency_calls,
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two attempts per hop is one retry per hop: three hops send 2^3 = 8
    // requests to the dependency, not (1 retry)^3 = 1 and not 3^3 = 27.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_base_of_the_power_is_the_attempts_per_hop() {
        let every_layer = measure(2, 2, RetryAt::EveryLayer)
            .await
            .expect("the chain runs");
        assert_eq!(every_layer.hops, 3);
        assert_eq!(every_layer.retries_per_hop, 1);
        assert_eq!(every_layer.dependency_calls, 8);
        assert_eq!(every_layer.predicted, 8);
        let edge_only = measure(2, 2, RetryAt::EdgeOnly)
            .await
            .expect("the chain runs");
        assert_eq!(edge_only.dependency_calls, 2);
    }
}
