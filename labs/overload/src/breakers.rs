//! Part 3, circuit breakers: a provider hangs for four seconds and then
//! recovers. Three breakers (the lab's own, failsafe's, tower-resilience's),
//! each in the two places practitioners argue about: outside the retries (a
//! logical call counts once) and inside them (every attempt counts, and an
//! attempt the breaker refuses ends the call instead of being retried).

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use anyhow::{Context, Result};
use failsafe::{StateMachine, backoff::Constant, failure_policy::ConsecutiveFailures};
use lab_kit::{Series, concurrently::run_all, stats::Latencies};
use seeded_rng::SplitMix64;
use serde::Serialize;
use tokio::time::Instant;
use tower::{Layer, ServiceExt, util::BoxCloneSyncService};
use tower_resilience_circuitbreaker::{CircuitBreakerError, CircuitBreakerLayer};

use crate::{
    Config,
    arrivals::open_loop,
    dependency::{Dependency, DependencyConfig},
    on_lab_clock,
    retrying::{Attempts, ClockedBreaker, full_jitter, lab_breaker},
};

lab_kit::series! {
    /// Which breaker, and where it sits relative to the retries.
    pub enum BreakerSetup in "breaker" {
        /// Retries, no breaker: the baseline.
        NoBreaker => "no-breaker",
        /// The lab's own (`overload_sim::breaker`), outside the retries.
        OwnOutside => "own-outside-retries",
        /// The lab's own, inside the retries, around each attempt.
        OwnInside => "own-inside-retries",
        /// failsafe 1.3, five failures in a row, outside the retries.
        FailsafeOutside => "failsafe-outside-retries",
        FailsafeInside => "failsafe-inside-retries",
        /// tower-resilience-circuitbreaker, outside the retries.
        TowerOutside => "tower-outside-retries",
        TowerInside => "tower-inside-retries",
    }
}

impl BreakerSetup {
    fn inside_retries(self) -> bool {
        matches!(
            self,
            BreakerSetup::OwnInside | BreakerSetup::FailsafeInside | BreakerSetup::TowerInside
        )
    }
}

/// What the users and the provider saw, in production time.
#[derive(Debug, Clone, Serialize)]
pub struct BreakerOutcome {
    pub users: u64,
    pub ok: u64,
    /// Failed after their attempts, and refused at once by an open breaker.
    pub failed: u64,
    pub refused: u64,
    /// Requests that reached the provider while it hung, and in all.
    pub reached_while_failing: u64,
    pub reached_provider: u64,
    /// p99 of the users who arrived while the provider hung: how long a
    /// user waited to learn that it failed.
    pub p99_while_failing_ms: f64,
    /// From the end of the hang to the first answer for a user who arrived
    /// after it.
    pub recovered_after_ms: f64,
}

/// An attempt, or a whole retrying call, as the breakers see it. A struct,
/// not a type alias: a boxed `dyn Future` in a `Service` impl trips the
/// compiler's check that the user's future is `Send` ("implementation of
/// `Service` is not general enough"), a named type does not.
pub struct Work(Pin<Box<dyn Future<Output = Result<(), Failed>> + Send>>);

impl std::future::IntoFuture for Work {
    type Output = Result<(), Failed>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<(), Failed>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        self.0
    }
}

impl Work {
    fn new(work: impl Future<Output = Result<(), Failed>> + Send + 'static) -> Work {
        Work(Box::pin(work))
    }
}

/// A failure, as a breaker counts it: a timeout or an error status.
#[derive(Debug, Clone, Copy)]
pub struct Failed;

impl std::fmt::Display for Failed {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("the provider failed")
    }
}

impl std::error::Error for Failed {}

/// How work went through a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Through {
    Ok,
    Failed,
    Refused,
}

/// One breaker, behind one shape: run this work, or refuse it.
#[derive(Clone)]
enum Gate {
    Open,
    Own(Arc<ClockedBreaker>),
    Failsafe(StateMachine<ConsecutiveFailures<Constant>, ()>),
    /// A tower service whose request is the work itself: the breaker's
    /// clones share one circuit.
    Tower(BoxCloneSyncService<Work, (), CircuitBreakerError<Failed>>),
}

impl Gate {
    async fn through(&self, work: Work) -> Through {
        let ended = |result: Result<(), Failed>| match result {
            Ok(()) => Through::Ok,
            Err(Failed) => Through::Failed,
        };
        match self {
            Gate::Open => ended(work.await),
            Gate::Own(breaker) => match breaker.around(work.into_future(), Result::is_ok).await {
                Some(result) => ended(result),
                None => Through::Refused,
            },
            Gate::Failsafe(breaker) => {
                if !breaker.is_call_permitted() {
                    return Through::Refused;
                }
                let result = work.await;
                match result {
                    Ok(()) => breaker.on_success(),
                    Err(Failed) => breaker.on_error(),
                }
                ended(result)
            }
            Gate::Tower(service) => match service.clone().oneshot(work).await {
                Ok(()) => Through::Ok,
                Err(CircuitBreakerError::OpenCircuit) => Through::Refused,
                Err(CircuitBreakerError::Inner(Failed)) => Through::Failed,
            },
        }
    }
}

fn gate(setup: BreakerSetup, epoch: Instant, time_scale: f64) -> Result<Gate> {
    let own = lab_breaker();
    let open_for = on_lab_clock(own.open_ms as f64 / 1000.0, time_scale);
    Ok(match setup {
        BreakerSetup::NoBreaker => Gate::Open,
        BreakerSetup::OwnOutside | BreakerSetup::OwnInside => {
            Gate::Own(Arc::new(ClockedBreaker::new(own, epoch, time_scale)))
        }
        BreakerSetup::FailsafeOutside | BreakerSetup::FailsafeInside => {
            let policy = failsafe::failure_policy::consecutive_failures(
                5,
                failsafe::backoff::constant(open_for),
            );
            Gate::Failsafe(failsafe::Config::new().failure_policy(policy).build())
        }
        BreakerSetup::TowerOutside | BreakerSetup::TowerInside => {
            let layer = CircuitBreakerLayer::builder()
                .failure_rate_threshold(own.failure_rate)
                .sliding_window_size(own.window)
                .minimum_number_of_calls(own.min_calls)
                .wait_duration_in_open(open_for)
                .permitted_calls_in_half_open(own.half_open_probes)
                .build()
                .context("configuring tower-resilience's breaker")?;
            let run = tower::service_fn(|work: Work| work.0);
            Gate::Tower(BoxCloneSyncService::new(layer.layer(run)))
        }
    })
}

/// What every user of one setup shares.
struct Users {
    setup: BreakerSetup,
    gate: Gate,
    attempts: Attempts,
    time_scale: f64,
}

fn attempt(users: &Users) -> Work {
    let once = users.attempts.once();
    Work::new(async move { if once.await { Ok(()) } else { Err(Failed) } })
}

async fn pause_before_retry(users: &Users, attempt: u32, rng: &mut SplitMix64) {
    let pause = full_jitter(
        attempt,
        Duration::from_millis(50),
        Duration::from_secs(1),
        rng,
    );
    tokio::time::sleep(pause.div_f64(users.time_scale)).await;
}

// ANCHOR: layering
/// One user's call: the retries around the breaker, or the breaker around
/// the retries.
async fn user_call(users: Arc<Users>, seed: u64) -> Through {
    let mut rng = SplitMix64::new(seed);
    if users.setup.inside_retries() {
        for attempt_number in 0..=users.attempts.retries {
            if attempt_number > 0 {
                pause_before_retry(&users, attempt_number, &mut rng).await;
            }
            match users.gate.through(attempt(&users)).await {
                Through::Failed => continue,
                // Ok, or refused: a refusal is final, never retried.
                done => return done,
            }
        }
        return Through::Failed;
    }
    let retrying_users = Arc::clone(&users);
    let retrying = Work::new(async move {
        for attempt_number in 0..=retrying_users.attempts.retries {
            if attempt_number > 0 {
                pause_before_retry(&retrying_users, attempt_number, &mut rng).await;
            }
            if attempt(&retrying_users).await.is_ok() {
                return Ok(());
            }
        }
        Err(Failed)
    });
    users.gate.through(retrying).await
}
// ANCHOR_END: layering

async fn breaker_case(setup: BreakerSetup, config: Config) -> Result<BreakerOutcome> {
    let scale = config.time_scale;
    let lab = |production_s: f64| on_lab_clock(production_s, scale);
    let epoch = Instant::now();
    let (fails_from, fails_until) = (config.breaker_fails_from_s, config.breaker_fails_until_s);
    let provider = Dependency::start(
        DependencyConfig {
            workers: 256,
            service: lab(config.bulkhead_service_ms / 1000.0),
            slow_service: lab(config.bulkhead_hang_s),
            slow_from: lab(fails_from),
            slow_until: lab(fails_until),
            work_outlives_caller: false,
            queue_limit: None,
        },
        epoch,
    )
    .await
    .context("starting the provider")?;
    let users = Arc::new(Users {
        setup,
        gate: gate(setup, epoch, scale)?,
        attempts: Attempts::new(
            provider.url(),
            lab(config.breaker_attempt_timeout_ms / 1000.0),
            config.breaker_retries,
        )?,
        time_scale: scale,
    });
    let calls = open_loop(
        config.breaker_rate_per_s * scale,
        epoch,
        lab(config.breaker_duration_s),
        config.seed,
        move |index, arrived| {
            let users = Arc::clone(&users);
            async move {
                let outcome = user_call(users, config.seed ^ (index + 1)).await;
                (arrived, epoch.elapsed(), outcome)
            }
        },
    )
    .await?;
    let production_s = |lab_time: Duration| lab_time.as_secs_f64() * scale;
    let mut while_failing = Latencies::default();
    let mut first_recovered_s = f64::INFINITY;
    let (mut ok, mut failed, mut refused) = (0, 0, 0);
    for (arrived, ended, outcome) in &calls {
        let (arrived_s, ended_s) = (production_s(*arrived), production_s(*ended));
        if arrived_s >= fails_from && arrived_s < fails_until {
            while_failing.record((*ended - *arrived).mul_f64(scale));
        }
        match outcome {
            Through::Ok => {
                ok += 1;
                if arrived_s >= fails_until {
                    first_recovered_s = first_recovered_s.min(ended_s);
                }
            }
            Through::Failed => failed += 1,
            Through::Refused => refused += 1,
        }
    }
    let stats = provider.stats();
    Ok(BreakerOutcome {
        users: calls.len() as u64,
        ok,
        failed,
        refused,
        reached_while_failing: stats
            .arrived_in_spell
            .load(std::sync::atomic::Ordering::Relaxed),
        reached_provider: stats.arrived.load(std::sync::atomic::Ordering::Relaxed),
        p99_while_failing_ms: while_failing.summary().p99_ms,
        recovered_after_ms: if first_recovered_s.is_finite() {
            (first_recovered_s - fails_until) * 1000.0
        } else {
            config.breaker_duration_s * 1000.0
        },
    })
}

/// Every setup side by side, each with its own provider.
pub async fn run_breakers(config: &Config) -> Result<Vec<(BreakerSetup, BreakerOutcome)>> {
    let config = config.clone();
    run_all(BreakerSetup::ALL, Series::series, move |setup| {
        breaker_case(setup, config.clone())
    })
    .await
}
