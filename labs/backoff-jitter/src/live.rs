//! The live storm: many reqwest callers hit the flaky dependency at once
//! while it is down, each through a retry policy, and the server counts what
//! arrives when.

use std::{sync::Arc, time::Duration};

use anyhow::{Context, Result, ensure};
use axum::http::StatusCode;
use backoff_sim::Strategy;
use lab_kit::{Output, server::spawn_axum, stats::Latencies};
use seeded_rng::SplitMix64;
use serde::Serialize;

use crate::{
    Config,
    flaky::{self, Arrival, FlakyConfig, Recorder, RetryAfterForm},
    policy::{CallReport, Ending, RetryBudget, RetryPolicy, send_with_retries},
};

/// One live scenario: how the dependency fails and how the callers retry.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    pub name: &'static str,
    pub strategy: Strategy,
    pub failure_status: StatusCode,
    pub retry_after: RetryAfterForm,
    pub honour_retry_after: bool,
    pub budget: bool,
}

/// The scenarios of the arrivals chart, then the 429 one for the table.
pub const SCENARIOS: [Scenario; 5] = [
    Scenario {
        name: "no-jitter",
        strategy: Strategy::Exponential,
        failure_status: StatusCode::SERVICE_UNAVAILABLE,
        retry_after: RetryAfterForm::Absent,
        honour_retry_after: false,
        budget: false,
    },
    Scenario {
        name: "full-jitter",
        strategy: Strategy::FullJitter,
        failure_status: StatusCode::SERVICE_UNAVAILABLE,
        retry_after: RetryAfterForm::Absent,
        honour_retry_after: false,
        budget: false,
    },
    Scenario {
        name: "retry-after",
        strategy: Strategy::FullJitter,
        failure_status: StatusCode::SERVICE_UNAVAILABLE,
        retry_after: RetryAfterForm::Seconds,
        honour_retry_after: true,
        budget: false,
    },
    Scenario {
        name: "budget",
        strategy: Strategy::FullJitter,
        failure_status: StatusCode::SERVICE_UNAVAILABLE,
        retry_after: RetryAfterForm::Absent,
        honour_retry_after: false,
        budget: true,
    },
    Scenario {
        name: "429-http-date",
        strategy: Strategy::FullJitter,
        failure_status: StatusCode::TOO_MANY_REQUESTS,
        retry_after: RetryAfterForm::HttpDate,
        honour_retry_after: true,
        budget: false,
    },
];

/// The retry policy of a scenario, from the lab's config.
pub fn policy_for(config: &Config, scenario: &Scenario) -> RetryPolicy {
    RetryPolicy {
        max_attempts: config.max_attempts,
        per_attempt_timeout: Duration::from_millis(config.per_attempt_timeout_ms),
        total_deadline: Duration::from_millis(config.total_deadline_ms),
        base: Duration::from_millis(config.base_ms),
        cap: Duration::from_millis(config.cap_ms),
        strategy: scenario.strategy,
        honour_retry_after: scenario.honour_retry_after,
        refuse_waits_past_deadline: true,
        budget: scenario.budget.then(|| {
            Arc::new(RetryBudget::new(
                config.budget_ratio,
                config.budget_initial_tokens,
            ))
        }),
    }
}

/// A shared client for the lab's callers: no proxy from the environment.
pub fn client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("building a reqwest client")
}

/// What a scenario's run observed, at the server and at the callers.
pub struct ScenarioRun {
    pub arrivals: Vec<Arrival>,
    pub reports: Vec<CallReport>,
    pub budget: Option<Arc<RetryBudget>>,
}

/// Starts a flaky server, lets `callers` clients each make one call to
/// `path` (with `method`, optionally with an Idempotency-Key) at once, waits
/// for all of them, and returns what happened.
pub async fn run_scenario(
    flaky_config: FlakyConfig,
    policy: &RetryPolicy,
    callers: usize,
    method: reqwest::Method,
    path: &str,
    with_key: bool,
    seed: u64,
) -> Result<ScenarioRun> {
    let recorder = Recorder::new(flaky_config);
    let server = spawn_axum(flaky::app(Arc::clone(&recorder))).await?;
    let url = server.url(path);
    let client = client()?;
    let mut callers_set = tokio::task::JoinSet::new();
    for caller in 0..callers as u64 {
        let (client, url, policy, method) =
            (client.clone(), url.clone(), policy.clone(), method.clone());
        callers_set.spawn(async move {
            let mut builder = client
                .request(method, &url)
                .header("x-client", caller.to_string());
            if with_key {
                builder = builder.header(
                    crate::policy::IDEMPOTENCY_KEY,
                    format!("order-{seed}-{caller}"),
                );
            }
            let request = builder.build().context("building a request")?;
            let mut rng = SplitMix64::new(seed.wrapping_mul(1_000_003).wrapping_add(caller));
            anyhow::Ok(send_with_retries(&client, request, &policy, &mut rng).await)
        });
    }
    let mut reports = Vec::with_capacity(callers);
    while let Some(joined) = callers_set.join_next().await {
        reports.push(joined.context("a caller task panicked")??);
    }
    server.stop(Duration::from_secs(1)).await?;
    Ok(ScenarioRun {
        arrivals: recorder.arrivals(),
        reports,
        budget: policy.budget.clone(),
    })
}

/// Server arrivals in one time bucket.
#[derive(Debug, Clone, Serialize)]
pub struct ArrivalBucket {
    pub t_ms: u64,
    pub arrivals: u64,
}

/// One scenario, summed up.
#[derive(Debug, Clone, Serialize)]
pub struct StormSummary {
    pub callers: usize,
    pub failure_status: u16,
    pub retry_after: &'static str,
    /// Requests the server received in all.
    pub calls: u64,
    /// Of which retries.
    pub retries: u64,
    pub calls_per_caller: f64,
    /// The busiest bucket of `live_bucket_ms`, and the busiest one after the
    /// first (which holds every caller's first attempt, whatever the policy).
    pub peak_per_bucket: u64,
    pub peak_retry_bucket: u64,
    pub succeeded: usize,
    pub failed: usize,
    /// Attempts the server saw before the moment its Retry-After allowed.
    pub early_attempts: usize,
    pub budget_refused: u64,
    pub gave_up_at_deadline: usize,
    pub p50_ms: f64,
    pub max_ms: f64,
    pub deadline_ms: u64,
}

/// Buckets arrivals by time since the server started.
pub fn bucket_arrivals(arrivals: &[Arrival], bucket_ms: u64) -> Vec<u64> {
    let bucket_ms = bucket_ms.max(1) as u128;
    let last = arrivals
        .iter()
        .map(|arrival| arrival.at.as_millis() / bucket_ms)
        .max()
        .unwrap_or(0);
    let mut counts = vec![0u64; last as usize + 1];
    for arrival in arrivals {
        counts[(arrival.at.as_millis() / bucket_ms) as usize] += 1;
    }
    counts
}

/// Every scenario of the chart: samples of arrivals over time, a summary each.
pub async fn storm(config: &Config, out: &mut Output) -> Result<()> {
    for scenario in SCENARIOS {
        eprintln!(
            "backoff-jitter: live, {} callers, {}",
            config.live_clients, scenario.name
        );
        let flaky_config = FlakyConfig {
            outage: Duration::from_millis(config.live_outage_ms),
            failure_status: scenario.failure_status,
            retry_after: scenario.retry_after,
            ..FlakyConfig::default()
        };
        let policy = policy_for(config, &scenario);
        let run = run_scenario(
            flaky_config,
            &policy,
            config.live_clients,
            reqwest::Method::GET,
            "/item",
            false,
            config.seed,
        )
        .await
        .with_context(|| format!("scenario {}", scenario.name))?;
        let calls = run.arrivals.len() as u64;
        let attempts: u64 = run
            .reports
            .iter()
            .map(|report| u64::from(report.attempts))
            .sum();
        // The server's count and the callers' count must agree, or the lab
        // is not measuring what it says it is.
        ensure!(
            calls == attempts,
            "{}: the server saw {calls} requests, the callers made {attempts}",
            scenario.name
        );
        let buckets = bucket_arrivals(&run.arrivals, config.live_bucket_ms);
        for (index, &arrivals) in buckets.iter().enumerate() {
            out.write_sample(
                &format!("arrivals-{}", scenario.name),
                &ArrivalBucket {
                    t_ms: index as u64 * config.live_bucket_ms,
                    arrivals,
                },
            )?;
        }
        let mut latencies = Latencies::default();
        for report in &run.reports {
            latencies.record(report.elapsed);
        }
        let latency = latencies.summary();
        let succeeded = run
            .reports
            .iter()
            .filter(|report| report.succeeded())
            .count();
        out.write_summary(
            &format!("live-{}", scenario.name),
            &StormSummary {
                callers: config.live_clients,
                failure_status: scenario.failure_status.as_u16(),
                retry_after: match scenario.retry_after {
                    RetryAfterForm::Absent => "none",
                    RetryAfterForm::Seconds => "seconds",
                    RetryAfterForm::HttpDate => "http-date",
                },
                calls,
                retries: calls - config.live_clients as u64,
                calls_per_caller: calls as f64 / config.live_clients as f64,
                peak_per_bucket: buckets.iter().copied().max().unwrap_or(0),
                peak_retry_bucket: buckets.iter().skip(1).copied().max().unwrap_or(0),
                succeeded,
                failed: run.reports.len() - succeeded,
                early_attempts: run.arrivals.iter().filter(|arrival| arrival.early).count(),
                budget_refused: run.budget.as_ref().map_or(0, |budget| budget.counts().1),
                gave_up_at_deadline: run
                    .reports
                    .iter()
                    .filter(|report| report.ending == Ending::DeadlineReached)
                    .count(),
                p50_ms: latency.p50_ms,
                max_ms: latency.max_ms,
                deadline_ms: config.total_deadline_ms,
            },
        )?;
    }
    Ok(())
}
