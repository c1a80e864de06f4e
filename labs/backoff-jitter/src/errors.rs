//! Which errors the policy retries, measured: the same retry policy meets
//! one failure at a time (statuses from the flaky server, a timeout, a
//! refused connection, a reset, and a name server answering SERVFAIL or
//! NXDOMAIN), and the lab counts the attempts each call made and what
//! reached the far end.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result};
use backoff_sim::Strategy;
use lab_dns::{
    dns_server::DnsServer,
    resolvers::{LabResolver, StubSettings},
};
use lab_kit::{
    Output,
    net::{AbortOnDrop, bind_loopback, closed_loopback_port, spawn_accept_loop},
    server::spawn_axum,
};
use seeded_rng::SplitMix64;
use serde::Serialize;
use tokio::io::AsyncReadExt;

use crate::{
    Config,
    flaky::{self, FlakyConfig, Recorder},
    policy::{AttemptOutcome, RetryPolicy, send_with_retries},
};

/// The failures, in the table's order.
pub const KINDS: [&str; 13] = [
    "400", "404", "429", "500", "502", "503", "504", "timeout", "refused", "reset", "servfail",
    "nxdomain", "200",
];

/// What the calls of one kind did.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorSummary {
    pub kind: &'static str,
    pub calls: usize,
    /// The policy's reading of the last attempt.
    pub outcome: String,
    pub attempts_per_call: f64,
    /// Requests the server received, or queries the name server received,
    /// per call (0 where nothing can reach anything: a refused connection).
    pub reached_per_call: f64,
}

fn policy(config: &Config) -> RetryPolicy {
    RetryPolicy {
        max_attempts: config.max_attempts,
        per_attempt_timeout: Duration::from_millis(config.deadline_per_attempt_ms),
        total_deadline: Duration::from_secs(10),
        base: Duration::from_millis(20),
        cap: Duration::from_millis(200),
        strategy: Strategy::FullJitter,
        honour_retry_after: false,
        refuse_waits_past_deadline: true,
        budget: None,
    }
}

/// A server that reads a request and closes with a reset (SO_LINGER 0).
async fn resetting_server(count: Arc<AtomicUsize>) -> Result<(SocketAddr, AbortOnDrop)> {
    let listener = bind_loopback().await?;
    let addr = listener.local_addr().context("reading the address")?;
    let task = spawn_accept_loop(listener, move |mut stream, _| {
        let count = Arc::clone(&count);
        async move {
            let mut buffer = [0u8; 2048];
            if let Ok(read) = stream.read(&mut buffer).await
                && read > 0
            {
                count.fetch_add(1, Ordering::SeqCst);
                let _ = stream.set_zero_linger();
            }
        }
    });
    Ok((addr, task))
}

/// Every kind, `calls_per_kind` calls each, one kind at a time.
pub async fn run(config: &Config, out: &mut Output) -> Result<()> {
    let recorder = Recorder::new(FlakyConfig {
        slow_for: Duration::from_secs(30),
        ..FlakyConfig::default()
    });
    let server = spawn_axum(flaky::app(Arc::clone(&recorder))).await?;
    let resets = Arc::new(AtomicUsize::new(0));
    let (reset_addr, _reset_server) = resetting_server(Arc::clone(&resets)).await?;
    let dns = DnsServer::start(30, Duration::ZERO).await?;
    dns.set_failing("broken.lab");
    let refused = closed_loopback_port()?;
    let plain = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("building a client")?;
    let resolving = reqwest::Client::builder()
        .no_proxy()
        .dns_resolver(Arc::new(LabResolver::new(&StubSettings::plain(dns.addr))?))
        .build()
        .context("building a client with the lab's resolver")?;
    let policy = policy(config);
    let port = server.addr.port();
    for (index, &kind) in KINDS.iter().enumerate() {
        let (client, url) = match kind {
            "timeout" => (&plain, server.url("/slow")),
            "refused" => (&plain, format!("http://{}/item", refused.addr())),
            "reset" => (&plain, format!("http://{reset_addr}/item")),
            "servfail" => (&resolving, format!("http://broken.lab:{port}/item")),
            "nxdomain" => (&resolving, format!("http://missing.lab:{port}/item")),
            code => (&plain, server.url(&format!("/status/{code}"))),
        };
        let (arrivals_before, resets_before) =
            (recorder.arrivals().len(), resets.load(Ordering::SeqCst));
        dns.clear_log();
        // The calls of one kind go out together, each with its own jitter.
        let calls = (0..config.errors_calls_per_kind).map(|call| {
            let (client, url, policy) = (client.clone(), url.clone(), policy.clone());
            let seed = config.seed + 300 + (index * 100 + call) as u64;
            async move {
                let request = client.get(&url).build().context("building a request")?;
                let mut rng = SplitMix64::new(seed);
                anyhow::Ok(send_with_retries(&client, request, &policy, &mut rng).await)
            }
        });
        let mut attempts = 0u32;
        let mut outcome = String::new();
        for report in futures_util::future::join_all(calls).await {
            let report = report?;
            attempts += report.attempts;
            outcome = match report.last {
                AttemptOutcome::Status(code) => format!("status {code}"),
                other => format!("{other:?}").to_lowercase(),
            };
        }
        let reached = match kind {
            "refused" => 0,
            "reset" => resets.load(Ordering::SeqCst) - resets_before,
            "servfail" | "nxdomain" => dns.queries().len(),
            _ => recorder.arrivals().len() - arrivals_before,
        };
        let calls = config.errors_calls_per_kind;
        out.write_summary(
            &format!("errors/{kind}"),
            &ErrorSummary {
                kind,
                calls,
                outcome,
                attempts_per_call: f64::from(attempts) / calls.max(1) as f64,
                reached_per_call: reached as f64 / calls.max(1) as f64,
            },
        )?;
    }
    Ok(())
}
