//! Part 1, lookups per request: the same run of requests from a client built
//! per request and from one shared client, each behind the counting
//! resolver, with a fast resolver and with a slow one.

use std::{
    net::{IpAddr, Ipv4Addr},
    sync::{Arc, atomic::Ordering},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use lab_kit::{Series, stats::Latencies};
use serde::Serialize;

use crate::{
    Config,
    resolvers::{CountingResolver, FixedAnswers},
};

lab_kit::series! {
    /// How the caller holds its reqwest client.
    pub enum ClientHolding {
        /// `reqwest::Client::new()` inside the request function.
        ClientPerRequest => "client-per-request",
        /// One client, built once, cloned into every caller.
        SharedPool => "shared-pool",
    }
}

lab_kit::series! {
    /// How long the resolver takes to answer.
    pub enum ResolverSpeed {
        /// Answers at once.
        Fast => "fast-resolver",
        /// Waits `slow_resolver_ms` first, as an overloaded DNS server would.
        Slow => "slow-resolver",
    }
}

/// What one setup did over the run.
#[derive(Debug, Clone, Serialize)]
pub struct LookupCount {
    pub holding: String,
    pub resolver: String,
    pub requests: usize,
    /// Calls reqwest made to the resolver.
    pub resolver_calls: usize,
    /// TCP connections the server served requests on.
    pub connections: u64,
    pub resolver_delay_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

// ANCHOR: build_client
/// The client each setup sends with: the counting resolver behind reqwest's
/// `dns_resolver` hook; the name resolves to 127.0.0.1.
fn client_with(resolver: CountingResolver) -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .no_proxy()
        .dns_resolver(resolver)
        .build()
        .context("building the client")
}
// ANCHOR_END: build_client

/// Runs every setup, one after the other, against one server.
pub async fn run_lookups(config: &Config) -> Result<Vec<(String, LookupCount)>> {
    let server = crate::servers::ok_server().await?;
    let url = format!("http://api.lab.test:{}/", server.addr.port());
    let mut results = Vec::new();
    for speed in ResolverSpeed::ALL {
        let delay = match speed {
            ResolverSpeed::Fast => Duration::ZERO,
            ResolverSpeed::Slow => Duration::from_secs_f64(config.slow_resolver_ms / 1000.0),
        };
        for holding in ClientHolding::ALL {
            let accepted_before = server.stats.accepted();
            let resolver = CountingResolver::new(
                Arc::new(FixedAnswers(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])),
                delay,
            );
            let calls = resolver.calls();
            let latencies = match holding {
                ClientHolding::ClientPerRequest => {
                    per_request(resolver, &url, config.lookup_requests).await?
                }
                ClientHolding::SharedPool => {
                    shared(client_with(resolver)?, &url, config.lookup_requests).await?
                }
            };
            // A shared pool can start a connect (and a lookup) when a request
            // finds its connection not yet back in the pool; hyper-util
            // finishes such a connect in the background. Count after they end:
            // once every lookup has its connection, or after 3 s.
            settle(&calls, &server.stats, accepted_before).await;
            let summary = latencies.summary();
            let series = format!("lookups/{}/{}", holding.series(), speed.series());
            results.push((
                series,
                LookupCount {
                    holding: holding.name().to_string(),
                    resolver: speed.name().to_string(),
                    requests: config.lookup_requests,
                    resolver_calls: calls.load(Ordering::SeqCst),
                    connections: server.stats.accepted() - accepted_before,
                    resolver_delay_ms: delay.as_secs_f64() * 1000.0,
                    p50_ms: summary.p50_ms,
                    p99_ms: summary.p99_ms,
                },
            ));
        }
    }
    Ok(results)
}

/// Waits until the server has accepted one connection per lookup (every
/// background connect has ended) and the counts stayed so for 100 ms, or 3 s.
async fn settle(
    calls: &std::sync::atomic::AtomicUsize,
    stats: &lab_kit::listener::ConnStats,
    accepted_before: u64,
) {
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut steady_since: Option<Instant> = None;
    while Instant::now() < deadline {
        let lookups = calls.load(Ordering::SeqCst) as u64;
        let connections = stats.accepted() - accepted_before;
        if lookups == connections {
            let since = *steady_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_millis(100) {
                return;
            }
        } else {
            steady_since = None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ANCHOR: per_request
/// A client per request: each one has an empty pool, so each request
/// connects, and each connect starts with a lookup. All clients share the
/// counting resolver's counter.
async fn per_request(resolver: CountingResolver, url: &str, requests: usize) -> Result<Latencies> {
    let shared_resolver = Arc::new(resolver);
    let mut latencies = Latencies::default();
    for _ in 0..requests {
        let started = Instant::now();
        let client = reqwest::Client::builder()
            .no_proxy()
            .dns_resolver(Arc::clone(&shared_resolver))
            .build()
            .context("building a client")?;
        send(&client, url).await?;
        latencies.record(started.elapsed());
    }
    Ok(latencies)
}
// ANCHOR_END: per_request

async fn shared(client: reqwest::Client, url: &str, requests: usize) -> Result<Latencies> {
    let mut latencies = Latencies::default();
    for _ in 0..requests {
        let started = Instant::now();
        send(&client, url).await?;
        latencies.record(started.elapsed());
    }
    Ok(latencies)
}

async fn send(client: &reqwest::Client, url: &str) -> Result<()> {
    let response = tokio::time::timeout(Duration::from_secs(5), client.get(url).send())
        .await
        .context("a request still waiting after 5 s")?
        .context("sending")?;
    response.bytes().await.context("reading the body")?;
    Ok(())
}
