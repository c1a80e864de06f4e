//! A deadline over the whole retry series: the caller has a budget (1 s),
//! the dependency is out for longer than that, and three retry policies meet
//! it: per-attempt timeouts only, a total deadline that still sleeps through
//! a wait that ends past it, and a total deadline that refuses such a wait.
//! Two outages: a dependency that hangs (every attempt times out), and one
//! that answers 503 with a Retry-After beyond the caller's budget.

use std::time::Duration;

use anyhow::{Context, Result};
use backoff_sim::Strategy;
use lab_kit::{Output, stats::Latencies};
use serde::Serialize;

use crate::{
    Config,
    flaky::{FlakyConfig, RetryAfterForm},
    live::run_scenario,
    policy::{Ending, RetryPolicy},
};

/// How the dependency is out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outage {
    /// Accepts every request and answers none within an attempt's timeout.
    Hangs,
    /// 503 with `Retry-After` set to the rest of the outage, beyond the
    /// caller's budget.
    RetryAfter,
}

impl Outage {
    pub const ALL: [Outage; 2] = [Outage::Hangs, Outage::RetryAfter];

    pub fn name(self) -> &'static str {
        match self {
            Outage::Hangs => "hangs",
            Outage::RetryAfter => "retry-after",
        }
    }
}

/// How the caller bounds its retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// A timeout on each attempt, and nothing over the series.
    PerAttemptOnly,
    /// The caller's budget as a total deadline; a wait that ends past it is
    /// slept through, and the call fails after it.
    Deadline,
    /// The same deadline; a wait that would end past it ends the call at once.
    DeadlineRefusesWait,
}

impl Bound {
    pub const ALL: [Bound; 3] = [
        Bound::PerAttemptOnly,
        Bound::Deadline,
        Bound::DeadlineRefusesWait,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Bound::PerAttemptOnly => "per-attempt-only",
            Bound::Deadline => "deadline",
            Bound::DeadlineRefusesWait => "deadline-refuses-wait",
        }
    }
}

/// The series of one outage and one bound: `deadline/hangs/deadline`.
pub fn series(outage: Outage, bound: Bound) -> String {
    format!("deadline/{}/{}", outage.name(), bound.name())
}

/// The policy a bound gives, from the lab's config.
pub fn policy(config: &Config, bound: Bound) -> RetryPolicy {
    RetryPolicy {
        max_attempts: config.max_attempts,
        per_attempt_timeout: Duration::from_millis(config.deadline_per_attempt_ms),
        total_deadline: match bound {
            // No deadline: one longer than anything this part can run.
            Bound::PerAttemptOnly => Duration::from_secs(3600),
            _ => Duration::from_millis(config.deadline_budget_ms),
        },
        base: Duration::from_millis(config.base_ms),
        cap: Duration::from_millis(config.cap_ms),
        strategy: Strategy::FullJitter,
        honour_retry_after: true,
        refuse_waits_past_deadline: bound != Bound::Deadline,
        budget: None,
    }
}

/// One outage met by one bound, as the callers saw it.
#[derive(Debug, Clone, Serialize)]
pub struct DeadlineSummary {
    pub outage: &'static str,
    pub bound: &'static str,
    pub callers: usize,
    /// The caller's budget: what the deadline is set to, and what the
    /// per-attempt-only policy ignores.
    pub budget_ms: u64,
    pub outage_ms: u64,
    pub answered: usize,
    pub gave_up_at_deadline: usize,
    pub attempts_exhausted: usize,
    pub attempts_mean: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Callers still waiting past their budget (by more than 50 ms).
    pub over_budget: usize,
}

/// Every outage against every bound, all at once (each pair has its own
/// server and callers); one summary per pair.
pub async fn run(config: &Config, out: &mut Output) -> Result<()> {
    let pairs: Vec<(Outage, Bound)> = Outage::ALL
        .into_iter()
        .flat_map(|outage| Bound::ALL.into_iter().map(move |bound| (outage, bound)))
        .collect();
    let runs = pairs.iter().enumerate().map(|(index, &(outage, bound))| {
        let flaky = FlakyConfig {
            outage: Duration::from_millis(config.deadline_outage_ms),
            retry_after: match outage {
                Outage::Hangs => RetryAfterForm::Absent,
                Outage::RetryAfter => RetryAfterForm::Seconds,
            },
            slow_for: Duration::from_millis(config.deadline_outage_ms),
            ..FlakyConfig::default()
        };
        let path = match outage {
            Outage::Hangs => "/slow",
            Outage::RetryAfter => "/item",
        };
        let policy = policy(config, bound);
        let seed = config.seed + 100 + index as u64;
        async move {
            run_scenario(
                flaky,
                &policy,
                config.deadline_callers,
                reqwest::Method::GET,
                path,
                false,
                seed,
            )
            .await
            .with_context(|| series(outage, bound))
        }
    });
    let results = futures_util::future::join_all(runs).await;
    for (&(outage, bound), result) in pairs.iter().zip(results) {
        let run = result?;
        let mut latencies = Latencies::default();
        for report in &run.reports {
            latencies.record(report.elapsed);
        }
        let latency = latencies.summary();
        let count = |ending: Ending| {
            run.reports
                .iter()
                .filter(|report| report.ending == ending)
                .count()
        };
        let budget = Duration::from_millis(config.deadline_budget_ms + 50);
        out.write_summary(
            &series(outage, bound),
            &DeadlineSummary {
                outage: outage.name(),
                bound: bound.name(),
                callers: run.reports.len(),
                budget_ms: config.deadline_budget_ms,
                outage_ms: config.deadline_outage_ms,
                answered: run
                    .reports
                    .iter()
                    .filter(|report| report.succeeded())
                    .count(),
                gave_up_at_deadline: count(Ending::DeadlineReached),
                attempts_exhausted: count(Ending::AttemptsExhausted),
                attempts_mean: run
                    .reports
                    .iter()
                    .map(|report| f64::from(report.attempts))
                    .fold(0.0, |sum, attempts| sum + attempts)
                    / run.reports.len().max(1) as f64,
                p50_ms: latency.p50_ms,
                p99_ms: latency.p99_ms,
                max_ms: latency.max_ms,
                over_budget: run
                    .reports
                    .iter()
                    .filter(|report| report.elapsed > budget)
                    .count(),
            },
        )?;
    }
    Ok(())
}
