//! A long outage: the dependency is down for five seconds, long enough for
//! capped exponential backoff to reach its cap and stay there. Without
//! jitter every caller's sleeps are the same sequence, so once the sleeps
//! stop growing the callers arrive together again, one spike per cap; a
//! fixed delay does the same from the first retry; full jitter spreads them.

use std::time::Duration;

use anyhow::{Context, Result};
use backoff_sim::Strategy;
use lab_kit::Output;
use serde::Serialize;

use crate::{
    Config,
    flaky::{FlakyConfig, RetryAfterForm},
    live::{bucket_arrivals, run_scenario},
    policy::RetryPolicy,
};

/// The strategies of this part, with their series.
pub const STRATEGIES: [(Strategy, &str); 3] = [
    (Strategy::Exponential, "cap/no-jitter"),
    (Strategy::FullJitter, "cap/full-jitter"),
    (Strategy::Constant, "cap/fixed-delay"),
];

/// The policy of one strategy: the live policy's base and cap, more
/// attempts and a longer deadline so the outage is met at the cap; the fixed
/// delay waits the cap every time.
pub fn policy(config: &Config, strategy: Strategy) -> RetryPolicy {
    let base = match strategy {
        Strategy::Constant => config.cap_ms,
        _ => config.base_ms,
    };
    RetryPolicy {
        max_attempts: config.cap_attempts,
        per_attempt_timeout: Duration::from_millis(config.per_attempt_timeout_ms),
        total_deadline: Duration::from_millis(config.cap_outage_ms * 2),
        base: Duration::from_millis(base),
        cap: Duration::from_millis(config.cap_ms),
        strategy,
        honour_retry_after: false,
        refuse_waits_past_deadline: true,
        budget: None,
    }
}

/// When capped exponential backoff reaches its cap: the sum of the sleeps
/// before it, base, 2 base, ... up to the first one at the cap.
pub fn reaches_cap_ms(base_ms: u64, cap_ms: u64) -> u64 {
    let (mut sleep, mut total) = (base_ms.max(1), 0);
    while sleep < cap_ms {
        total += sleep;
        sleep *= 2;
    }
    total
}

/// The most arrivals in any window of `width_ms` that starts at or after
/// `from_ms` (arrival times in ms, any order).
pub fn peak_in_window(times_ms: &[f64], from_ms: f64, width_ms: f64) -> usize {
    let mut times: Vec<f64> = times_ms.iter().copied().filter(|&t| t >= from_ms).collect();
    times.sort_by(f64::total_cmp);
    let mut peak = 0;
    let mut start = 0;
    for end in 0..times.len() {
        while times[end] - times[start] >= width_ms {
            start += 1;
        }
        peak = peak.max(end - start + 1);
    }
    peak
}

/// One strategy against the long outage.
#[derive(Debug, Clone, Serialize)]
pub struct CapSummary {
    pub strategy: &'static str,
    pub callers: usize,
    pub outage_ms: u64,
    pub cap_ms: u64,
    /// From the first attempt to the moment no-jitter backoff reaches the cap.
    pub cap_from_ms: u64,
    pub calls: usize,
    /// The most arrivals within any 100 ms after `cap_from_ms`.
    pub peak_100ms_at_cap: usize,
    pub succeeded: usize,
}

/// One arrival bucket, for the chart.
#[derive(Debug, Clone, Serialize)]
pub struct CapBucket {
    pub t_ms: u64,
    pub arrivals: u64,
}

/// Runs the three strategies side by side, each with its own dependency.
pub async fn run(config: &Config, out: &mut Output) -> Result<()> {
    let flaky = FlakyConfig {
        outage: Duration::from_millis(config.cap_outage_ms),
        retry_after: RetryAfterForm::Absent,
        ..FlakyConfig::default()
    };
    let runs = STRATEGIES
        .iter()
        .enumerate()
        .map(|(index, &(strategy, series))| {
            let policy = policy(config, strategy);
            async move {
                run_scenario(
                    flaky,
                    &policy,
                    config.live_clients,
                    reqwest::Method::GET,
                    "/item",
                    false,
                    config.seed + 200 + index as u64,
                )
                .await
                .context(series)
            }
        });
    let results = futures_util::future::join_all(runs).await;
    let cap_from_ms = reaches_cap_ms(config.base_ms, config.cap_ms);
    for (&(strategy, series), result) in STRATEGIES.iter().zip(results) {
        let run = result?;
        let times: Vec<f64> = run
            .arrivals
            .iter()
            .map(|arrival| arrival.at.as_secs_f64() * 1000.0)
            .collect();
        for (index, arrivals) in bucket_arrivals(&run.arrivals, config.live_bucket_ms)
            .into_iter()
            .enumerate()
        {
            out.write_sample(
                series,
                &CapBucket {
                    t_ms: index as u64 * config.live_bucket_ms,
                    arrivals,
                },
            )?;
        }
        out.write_summary(
            series,
            &CapSummary {
                strategy: strategy.name(),
                callers: run.reports.len(),
                outage_ms: config.cap_outage_ms,
                cap_ms: config.cap_ms,
                cap_from_ms,
                calls: run.arrivals.len(),
                peak_100ms_at_cap: peak_in_window(&times, cap_from_ms as f64, 100.0),
                succeeded: run
                    .reports
                    .iter()
                    .filter(|report| report.succeeded())
                    .count(),
            },
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_reached_after_the_sleeps_below_it() {
        // 50 + 100 + 200 + 400, then 800 = the cap.
        assert_eq!(reaches_cap_ms(50, 800), 750);
        assert_eq!(reaches_cap_ms(800, 800), 0);
    }

    #[test]
    fn the_peak_counts_the_busiest_window_after_the_start() {
        let times = [10.0, 900.0, 950.0, 990.0, 1200.0, 1250.0];
        assert_eq!(peak_in_window(&times, 100.0, 100.0), 3);
        assert_eq!(peak_in_window(&times, 1000.0, 100.0), 2);
        assert_eq!(peak_in_window(&[], 0.0, 100.0), 0);
    }
}
