//! Part 5, the storm that outlives its cause: a dependency with finite
//! capacity turns slow for two seconds. Its callers time out and retry; if
//! every failure brings more attempts than the dependency can serve, the
//! queue never drains, every answer comes too late, and the outage goes on
//! after the dependency is well again. What sustains it is the load the
//! failures create, and the work the dependency does for callers who left.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result};
use lab_kit::{Output, Series, concurrently::run_all};
use seeded_rng::SplitMix64;
use serde::Serialize;
use tokio::time::Instant;

use crate::{
    Config,
    arrivals::open_loop,
    dependency::{Dependency, DependencyConfig},
    on_lab_clock,
    retrying::{Attempts, ClockedBreaker, RetryTokens, full_jitter, lab_breaker},
};

lab_kit::series! {
    /// How the callers retry, and what protects the dependency.
    pub enum Storm in "storm" {
        /// Up to three retries, each at once.
        Naive => "naive",
        /// Up to three retries after full-jitter exponential backoff.
        BackoffJitter => "backoff-jitter",
        /// Backoff and jitter, and a retry budget: a retry spends a token,
        /// a first try earns a tenth of one.
        RetryBudget => "retry-budget",
        /// Immediate retries, each attempt through a circuit breaker; what
        /// the breaker refuses fails at once and is not retried.
        Breaker => "breaker",
        /// Immediate retries against a dependency that answers 503 when ten
        /// requests already wait for a worker.
        ServerSheds => "server-sheds",
    }
}

/// One bucket of the timeline, per production second.
#[derive(Debug, Clone, Serialize)]
pub struct StormBucket {
    pub t_s: f64,
    /// Users who arrived (the offered load, whatever the callers did next).
    pub users_per_s: f64,
    /// Attempts that went out: first tries, and retries.
    pub first_tries_per_s: f64,
    pub retries_per_s: f64,
    /// Users answered 200 (by the time of the answer).
    pub goodput_per_s: f64,
    /// Requests waiting for a worker at the dependency, at the bucket's end.
    pub waiting_at_dependency: u64,
}

/// A whole run of one variant.
#[derive(Debug, Clone, Serialize)]
pub struct StormOutcome {
    /// When the dependency was slow (production seconds from the start).
    pub outage_from_s: f64,
    pub outage_until_s: f64,
    pub users: u64,
    pub attempts: u64,
    /// Attempts per user.
    pub amplification: f64,
    /// Goodput in the last `LATE_S` seconds, as a share of the users who
    /// arrived then.
    pub late_goodput_pct: f64,
    /// From when on, after the outage, every window of `WINDOW_S` to the
    /// end had goodput of at least `RECOVERED_PCT` of its users; absent if
    /// it never did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovered_at_s: Option<f64>,
    /// The same in words, for the table: "6.5 s", or "not in this run".
    pub recovered_at: String,
    pub peak_waiting_at_dependency: u64,
    /// Work the dependency finished, for anyone or for no one.
    pub served_by_dependency: u64,
    /// When the breaker opened (production seconds); empty without one.
    pub breaker_opened_s: Vec<f64>,
}

/// The last seconds of the run that say whether it recovered.
pub const LATE_S: f64 = 4.0;
/// Goodput at this share of the offered load counts as recovered.
pub const RECOVERED_PCT: f64 = 80.0;
/// The window recovery is judged over: long enough that the randomness of
/// arrivals (about 30 a bucket) does not decide it.
pub const WINDOW_S: f64 = 2.0;

/// Counts per bucket, filled by every user task.
struct Timeline {
    bucket: Duration,
    users: Vec<AtomicU64>,
    first_tries: Vec<AtomicU64>,
    retries: Vec<AtomicU64>,
    goodput: Vec<AtomicU64>,
    epoch: Instant,
}

impl Timeline {
    fn count(&self, counts: &[AtomicU64]) {
        let index = (self.epoch.elapsed().as_secs_f64() / self.bucket.as_secs_f64()) as usize;
        if let Some(count) = counts.get(index) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What every user of one variant shares.
struct Callers {
    variant: Storm,
    tries: Attempts,
    scale: f64,
    timeline: Timeline,
    budget: Mutex<RetryTokens>,
    breaker: ClockedBreaker,
    attempts: AtomicU64,
}

// ANCHOR: user
/// One user: the first try and the retries its variant allows.
async fn user(callers: Arc<Callers>, seed: u64) {
    let callers = &*callers;
    let mut rng = SplitMix64::new(seed);
    callers.timeline.count(&callers.timeline.users);
    callers.budget.lock().expect("no panic holds it").earn();
    for attempt in 0..=callers.tries.retries {
        if attempt > 0 {
            let jittered = matches!(callers.variant, Storm::BackoffJitter | Storm::RetryBudget);
            if callers.variant == Storm::RetryBudget
                && !callers
                    .budget
                    .lock()
                    .expect("no panic holds it")
                    .try_spend()
            {
                return;
            }
            if jittered {
                let pause = full_jitter(
                    attempt,
                    Duration::from_millis(100),
                    Duration::from_secs(2),
                    &mut rng,
                );
                tokio::time::sleep(pause.div_f64(callers.scale)).await;
            }
        }
        let timeline = &callers.timeline;
        let one_attempt = async {
            timeline.count(if attempt == 0 {
                &timeline.first_tries
            } else {
                &timeline.retries
            });
            callers.attempts.fetch_add(1, Ordering::Relaxed);
            callers.tries.once().await
        };
        let ok = if callers.variant == Storm::Breaker {
            // Refused: fail fast, and do not retry what the breaker refused.
            let Some(ok) = callers.breaker.around(one_attempt, |ok| *ok).await else {
                return;
            };
            ok
        } else {
            one_attempt.await
        };
        if ok {
            timeline.count(&timeline.goodput);
            return;
        }
    }
}
// ANCHOR_END: user

async fn storm_case(variant: Storm, config: Config) -> Result<(Vec<StormBucket>, StormOutcome)> {
    let scale = config.storm_time_scale;
    let lab = |production_s: f64| on_lab_clock(production_s, scale);
    let epoch = Instant::now();
    let dependency = Dependency::start(
        DependencyConfig {
            workers: config.storm_workers,
            service: lab(config.storm_service_ms / 1000.0),
            slow_service: lab(config.storm_slow_service_ms / 1000.0),
            slow_from: lab(config.storm_outage_from_s),
            slow_until: lab(config.storm_outage_until_s),
            work_outlives_caller: true,
            queue_limit: (variant == Storm::ServerSheds).then_some(config.storm_queue_limit),
        },
        epoch,
    )
    .await
    .context("starting the dependency")?;
    let buckets = (config.storm_duration_s / config.storm_bucket_s).ceil() as usize;
    let zeros = || (0..buckets).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
    let callers = Arc::new(Callers {
        variant,
        tries: Attempts::new(
            dependency.url(),
            lab(config.storm_attempt_timeout_ms / 1000.0),
            config.storm_retries,
        )?,
        scale,
        timeline: Timeline {
            bucket: lab(config.storm_bucket_s),
            users: zeros(),
            first_tries: zeros(),
            retries: zeros(),
            goodput: zeros(),
            epoch,
        },
        budget: Mutex::new(RetryTokens::new(10.0, 0.1)),
        breaker: ClockedBreaker::new(lab_breaker(), epoch, scale),
        attempts: AtomicU64::new(0),
    });
    // The queue at the dependency, read at the end of every bucket.
    let waiting = dependency.stats().waiting.clone();
    let bucket = lab(config.storm_bucket_s);
    let sampler = tokio::spawn(async move {
        let mut readings = Vec::with_capacity(buckets);
        for index in 1..=buckets {
            tokio::time::sleep_until(epoch + bucket * index as u32).await;
            readings.push(waiting.now());
        }
        readings
    });
    let users = {
        let callers = Arc::clone(&callers);
        open_loop(
            config.storm_rate_per_s * scale,
            epoch,
            lab(config.storm_duration_s),
            config.seed,
            move |index, _| user(Arc::clone(&callers), config.seed ^ (index + 1)),
        )
        .await?
        .len() as u64
    };
    let waiting_readings = sampler.await.context("the queue sampler failed")?;
    let per_s = |count: &AtomicU64| count.load(Ordering::Relaxed) as f64 / config.storm_bucket_s;
    let timeline = &callers.timeline;
    let samples: Vec<StormBucket> = (0..buckets)
        .map(|index| StormBucket {
            t_s: index as f64 * config.storm_bucket_s,
            users_per_s: per_s(&timeline.users[index]),
            first_tries_per_s: per_s(&timeline.first_tries[index]),
            retries_per_s: per_s(&timeline.retries[index]),
            goodput_per_s: per_s(&timeline.goodput[index]),
            waiting_at_dependency: waiting_readings.get(index).copied().unwrap_or(0),
        })
        .collect();
    let summary = summarize(&samples, &callers, &dependency, users, &config);
    Ok((samples, summary))
}

fn summarize(
    samples: &[StormBucket],
    callers: &Callers,
    dependency: &Dependency,
    users: u64,
    config: &Config,
) -> StormOutcome {
    let late: Vec<&StormBucket> = samples
        .iter()
        .filter(|sample| sample.t_s >= config.storm_duration_s - LATE_S)
        .collect();
    let late_good: f64 = late.iter().map(|sample| sample.goodput_per_s).sum();
    let late_offered: f64 = late.iter().map(|sample| sample.users_per_s).sum();
    let window = ((WINDOW_S / config.storm_bucket_s).round() as usize).max(1);
    let good_window = |start: usize| {
        let buckets = &samples[start..(start + window).min(samples.len())];
        let good: f64 = buckets.iter().map(|sample| sample.goodput_per_s).sum();
        let users: f64 = buckets.iter().map(|sample| sample.users_per_s).sum();
        good >= RECOVERED_PCT / 100.0 * users
    };
    // The earliest bucket after the outage from which every window is good.
    let last_window = samples.len().saturating_sub(window);
    let recovered_at_s = (0..=last_window)
        .filter(|index| samples[*index].t_s >= config.storm_outage_until_s)
        .find(|index| (*index..=last_window).all(good_window))
        .map(|index| samples[index].t_s);
    let attempts = callers.attempts.load(Ordering::Relaxed);
    let breaker_opened_s = callers.breaker.opened_s();
    StormOutcome {
        outage_from_s: config.storm_outage_from_s,
        outage_until_s: config.storm_outage_until_s,
        users,
        attempts,
        amplification: attempts as f64 / users.max(1) as f64,
        late_goodput_pct: if late_offered > 0.0 {
            100.0 * late_good / late_offered
        } else {
            0.0
        },
        recovered_at_s,
        recovered_at: match recovered_at_s {
            Some(at_s) => format!("{at_s} s"),
            None => "not in this run".to_string(),
        },
        peak_waiting_at_dependency: dependency.stats().waiting.peak(),
        served_by_dependency: dependency.stats().served.load(Ordering::Relaxed),
        breaker_opened_s,
    }
}

/// Every variant side by side, each with its own dependency.
pub async fn run_storm(config: &Config, out: &mut Output) -> Result<()> {
    let config = config.clone();
    let runs = run_all(Storm::ALL, Series::series, move |variant| {
        storm_case(variant, config.clone())
    })
    .await?;
    for (variant, (samples, summary)) in runs {
        for sample in &samples {
            out.write_sample(&variant.series(), sample)?;
        }
        out.write_summary(&variant.series(), &summary)?;
    }
    Ok(())
}
