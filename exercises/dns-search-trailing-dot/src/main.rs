//! The check: the dns lab's own DNS server on 127.0.0.1 (which logs every
//! question), hickory-resolver pointed at it with a pod's settings (`ndots:5`,
//! two search domains: the lab's `LabResolver`), an HTTP server for the
//! payments API, and one charge through the piece.

use std::{
    collections::BTreeSet,
    net::{IpAddr, Ipv4Addr},
    process::ExitCode,
    time::Duration,
};

use anyhow::{Context, Result};
use axum::{Router, extract::Path, routing::post};
use exercise_kit::{Variant, Verdict, pick_async};
use lab_dns::{
    dns_server::DnsServer,
    resolvers::{LabResolver, StubSettings},
    server_lookups::SEARCH_DOMAINS,
};
use lab_kit::server::spawn_axum;

exercise_kit::exercise!(
    "a resolver tries the search domains first for a name with fewer dots than ndots, unless \
     the name is fully qualified: end the payments host with a trailing dot",
);

/// A pod's resolver: Kubernetes writes `options ndots:5`.
const NDOTS: usize = 5;
/// The name as the DNS server stores it (it ignores a trailing dot).
const NAME: &str = "api.payments.example";
const ORDER: u32 = 7;

async fn check(variant: Variant) -> Result<Verdict> {
    let api = spawn_axum(Router::new().route(
        "/charge/{order}",
        post(|Path(order): Path<u32>| async move { format!("charged {order}") }),
    ))
    .await?;
    let dns = DnsServer::start(30, Duration::ZERO).await?;
    dns.set(NAME, &[IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    let resolver = LabResolver::new(&StubSettings {
        server: dns.addr,
        search: SEARCH_DOMAINS.map(String::from).to_vec(),
        ndots: NDOTS,
        cache: true,
    })?;
    let builder = reqwest::Client::builder().dns_resolver(resolver);
    let client = builder
        .no_proxy()
        .build()
        .context("building a client behind the pod's resolver")?;
    let port = api.addr.port();
    let charge = pick_async!(
        variant,
        dns_search_trailing_dot::charge(&client, port, ORDER),
        solution::charge(&client, port, ORDER),
    );
    let answer = tokio::time::timeout(Duration::from_secs(5), charge)
        .await
        .context("the charge still waiting after 5 s")?
        .context("the charge")?;
    anyhow::ensure!(
        answer == format!("charged {ORDER}"),
        "the API answered the charge with {answer:?}"
    );
    let queries = dns.queries();
    let nxdomain = queries
        .iter()
        .filter(|query| query.outcome == "nxdomain")
        .count();
    let mut seen = BTreeSet::new();
    let names: Vec<&str> = queries
        .iter()
        .filter(|query| seen.insert(query.name.as_str()))
        .map(|query| query.name.as_str())
        .collect();
    let asked = queries.len();
    let kinds: Vec<&str> = queries.iter().map(|query| query.kind.as_str()).collect();
    let kinds = kinds.join(", ");
    Ok(if asked == 0 {
        Verdict::fail(
            "the charge was answered, but the DNS server received no question at all: the \
             service must reach the API by its name, through the resolver",
        )
    } else if nxdomain > 0 || names != [NAME] {
        Verdict::fail(format!(
            "one lookup under ndots:{NDOTS} sent {asked} questions to the DNS server, {nxdomain} \
             of them answered NXDOMAIN, for {} names tried in this order: {}; every search \
             domain was tried before the name as written, a round trip to the cluster's DNS each",
            names.len(),
            names.join(", ")
        ))
    } else {
        Verdict::pass(format!(
            "one lookup under ndots:{NDOTS} sent {asked} question(s) ({kinds}), all for {NAME}, \
             none answered NXDOMAIN: the name was asked as written, and only that"
        ))
    })
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
