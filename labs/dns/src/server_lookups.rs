//! Part 3, a real DNS server on loopback: reqwest with hickory-resolver
//! pointed at the lab's server, with and without hickory's cache (what the
//! server receives over a run of new connections, and what a slow server
//! costs each), and search domains with `ndots:5` against a fully qualified
//! name with a trailing dot (how many questions one lookup asks).

use std::{
    collections::BTreeSet,
    net::{IpAddr, Ipv4Addr},
    sync::{Arc, atomic::Ordering},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use lab_kit::{Series, concurrently::run_all, stats::Latencies};
use serde::Serialize;

use crate::{
    Config,
    dns_server::DnsServer,
    resolvers::{CountingResolver, LabResolver, StubSettings},
};

lab_kit::series! {
    /// hickory-resolver's response cache.
    pub enum Cache in "cache" {
        /// `cache_size: 0`: every lookup asks the server.
        Off => "off",
        /// The default cache, which keeps an answer for its TTL.
        On => "on",
    }
}

/// One cache setting over the run.
#[derive(Debug, Clone, Serialize)]
pub struct CacheRun {
    pub requests: usize,
    pub interval_ms: f64,
    pub ttl_s: f64,
    pub server_delay_ms: f64,
    /// Calls reqwest made to the resolver (one per new connection).
    pub lookups: usize,
    /// Questions the DNS server received, and of which type.
    pub queries: usize,
    pub queries_a: usize,
    pub queries_aaaa: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// Both cache settings, side by side, each with a server of its own.
pub async fn run_cache(config: &Config) -> Result<Vec<(String, CacheRun)>> {
    let results = run_all(
        Cache::ALL,
        |cache| cache.name().to_string(),
        |cache| cache_run(cache, config.clone()),
    )
    .await?;
    Ok(results
        .into_iter()
        .map(|(cache, run)| (cache.series(), run))
        .collect())
}

async fn cache_run(cache: Cache, config: Config) -> Result<CacheRun> {
    let http = lab_kit::server::spawn_axum(
        axum::Router::new().route("/", axum::routing::get(|| async { "ok" })),
    )
    .await?;
    let delay = Duration::from_secs_f64(config.dns_delay_ms / 1000.0);
    let dns = DnsServer::start(config.cache_ttl_s, delay).await?;
    dns.set("api.lab.test", &[IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    let resolver = LabResolver::new(&StubSettings {
        cache: cache == Cache::On,
        ..StubSettings::plain(dns.addr)
    })?;
    let counting = Arc::new(CountingResolver::new(Arc::new(resolver), Duration::ZERO));
    let url = format!("http://api.lab.test:{}/", http.addr.port());
    let interval = Duration::from_secs_f64(config.cache_interval_ms / 1000.0);
    let mut latencies = Latencies::default();
    let mut ticker = tokio::time::interval(interval);
    for _ in 0..config.cache_requests {
        ticker.tick().await;
        // A new connection each time (a client per request), so every
        // request asks the resolver.
        let client = reqwest::Client::builder()
            .no_proxy()
            .dns_resolver(Arc::clone(&counting))
            .build()
            .context("building a client")?;
        let started = Instant::now();
        get(&client, &url).await?;
        latencies.record(started.elapsed());
    }
    let queries = dns.queries();
    let summary = latencies.summary();
    Ok(CacheRun {
        requests: config.cache_requests,
        interval_ms: config.cache_interval_ms,
        ttl_s: f64::from(config.cache_ttl_s),
        server_delay_ms: config.dns_delay_ms,
        lookups: counting.calls().load(Ordering::SeqCst),
        queries: queries.len(),
        queries_a: queries.iter().filter(|query| query.kind == "A").count(),
        queries_aaaa: queries.iter().filter(|query| query.kind == "AAAA").count(),
        p50_ms: summary.p50_ms,
        p99_ms: summary.p99_ms,
    })
}

lab_kit::series! {
    /// A name and the resolver settings it is looked up with.
    pub enum SearchCase in "search" {
        /// `api.payments.example` (two dots) with `ndots:5` and two search
        /// domains, as in a Kubernetes pod.
        TwoDotName => "two-dot-name",
        /// The same name with a trailing dot: fully qualified.
        TrailingDot => "trailing-dot",
        /// `inventory`, a service in the pod's own namespace.
        ShortName => "short-name",
        /// The two-dot name with hickory's default `ndots:1`.
        TwoDotNameNdots1 => "two-dot-name-ndots-1",
    }
}

impl SearchCase {
    fn host(self) -> &'static str {
        match self {
            SearchCase::TwoDotName | SearchCase::TwoDotNameNdots1 => "api.payments.example",
            SearchCase::TrailingDot => "api.payments.example.",
            SearchCase::ShortName => "inventory",
        }
    }

    fn ndots(self) -> usize {
        match self {
            SearchCase::TwoDotNameNdots1 => 1,
            _ => 5,
        }
    }
}

/// The search domains of a pod in the `default` namespace, two of them.
pub const SEARCH_DOMAINS: [&str; 2] = ["default.svc.cluster.local", "svc.cluster.local"];

/// One lookup and what the server was asked for it.
#[derive(Debug, Clone, Serialize)]
pub struct SearchLookup {
    pub host: String,
    pub ndots: usize,
    pub search_domains: usize,
    pub queries: usize,
    pub nxdomain: usize,
    /// The names asked, in the order first asked.
    pub names_tried: Vec<String>,
    pub names: usize,
    pub answered: bool,
    pub ms: f64,
}

/// Every case, one after the other, against one server whose log is
/// cleared between them.
pub async fn run_search() -> Result<Vec<(String, SearchLookup)>> {
    let http = lab_kit::server::spawn_axum(
        axum::Router::new().route("/", axum::routing::get(|| async { "ok" })),
    )
    .await?;
    let dns = DnsServer::start(30, Duration::ZERO).await?;
    let loopback = [IpAddr::V4(Ipv4Addr::LOCALHOST)];
    dns.set("api.payments.example", &loopback);
    dns.set("inventory.default.svc.cluster.local", &loopback);
    let mut results = Vec::new();
    for case in SearchCase::ALL {
        dns.clear_log();
        let resolver = LabResolver::new(&StubSettings {
            server: dns.addr,
            search: SEARCH_DOMAINS
                .iter()
                .map(|domain| domain.to_string())
                .collect(),
            ndots: case.ndots(),
            cache: true,
        })?;
        let client = reqwest::Client::builder()
            .no_proxy()
            .dns_resolver(resolver)
            .build()
            .context("building the client")?;
        let url = format!("http://{}:{}/", case.host(), http.addr.port());
        let started = Instant::now();
        let answered = get(&client, &url).await.is_ok();
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let queries = dns.queries();
        let mut seen = BTreeSet::new();
        let names_tried: Vec<String> = queries
            .iter()
            .filter(|query| seen.insert(query.name.clone()))
            .map(|query| query.name.clone())
            .collect();
        results.push((
            case.series(),
            SearchLookup {
                host: case.host().to_string(),
                ndots: case.ndots(),
                search_domains: SEARCH_DOMAINS.len(),
                queries: queries.len(),
                nxdomain: queries
                    .iter()
                    .filter(|query| query.outcome == "nxdomain")
                    .count(),
                names: names_tried.len(),
                names_tried,
                answered,
                ms,
            },
        ));
    }
    Ok(results)
}

async fn get(client: &reqwest::Client, url: &str) -> Result<()> {
    let response = tokio::time::timeout(Duration::from_secs(5), client.get(url).send())
        .await
        .context("a request still waiting after 5 s")?
        .with_context(|| format!("GET {url}"))?;
    response.bytes().await.context("reading the body")?;
    Ok(())
}
