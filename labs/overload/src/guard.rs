//! The outbound guard, assembled: one reqwest-based client for one
//! dependency with every protection of this chapter, in the order the lab's
//! measurements recommend. From the outside in:
//!
//! 1. a bulkhead: at most `slots` logical calls to this dependency at once;
//! 2. a circuit breaker around the whole retrying call: one breaker call per
//!    user request, so a blip the retries absorb never counts against it
//!    (part 4 of the lab); a refusal is final;
//! 3. retries, each paid for from a retry budget, after full-jitter backoff
//!    or after the `Retry-After` the dependency asked for (capped);
//! 4. a timeout on each attempt.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use overload_sim::breaker::BreakerConfig;
use reqwest::{StatusCode, header::RETRY_AFTER};
use seeded_rng::SplitMix64;
use tokio::{sync::Semaphore, time::Instant};

use crate::retrying::{ClockedBreaker, RetryTokens, full_jitter};

/// The knobs of one guard.
#[derive(Debug, Clone)]
pub struct GuardConfig {
    /// Logical calls in flight at once; the rest wait up to `slot_wait`.
    pub slots: usize,
    pub slot_wait: Duration,
    pub attempt_timeout: Duration,
    /// Retries after the first try, at most.
    pub retries: u32,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// The longest `Retry-After` honoured; a longer one ends the call.
    pub retry_after_cap: Duration,
    /// A retry costs one token; a first try earns `budget_per_first_try`,
    /// up to `budget_max`.
    pub budget_per_first_try: f64,
    pub budget_max: f64,
    /// In production milliseconds since the guard started.
    pub breaker: BreakerConfig,
    /// How much faster than production this guard's clock runs: 1 in
    /// production; in a lab run on a compressed clock, the lab's time scale.
    /// Every `Duration` above is already on that clock; a `Retry-After`,
    /// which the dependency sends in production seconds, is divided by it.
    pub time_scale: f64,
    pub seed: u64,
}

/// Why a guarded call did not return a success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardError {
    /// Every slot stayed busy for `slot_wait`.
    BulkheadFull,
    /// The breaker is open: the dependency was not called.
    BreakerOpen,
    /// Retries were left, but the budget was not.
    BudgetSpent(Failure),
    /// The dependency asked to wait longer than `retry_after_cap`.
    RetryAfterTooLong(Duration),
    /// The last attempt's failure, after every retry.
    Failed(Failure),
}

/// How one attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    TimedOut,
    /// A status worth retrying: 429 or 5xx.
    Status(u16),
    /// Refused, reset, or not HTTP.
    Transport,
}

impl std::fmt::Display for GuardError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GuardError::BulkheadFull => write!(formatter, "every slot to the dependency is busy"),
            GuardError::BreakerOpen => write!(formatter, "the circuit breaker is open"),
            GuardError::BudgetSpent(last) => write!(formatter, "no retry budget left ({last:?})"),
            GuardError::RetryAfterTooLong(wait) => {
                write!(formatter, "the dependency asked to wait {wait:?}")
            }
            GuardError::Failed(last) => write!(formatter, "every attempt failed ({last:?})"),
        }
    }
}

impl std::error::Error for GuardError {}

/// What an attempt said: success, or a failure and maybe a wait it asked for.
enum Attempt {
    Success(reqwest::Response),
    /// A client error other than 429: not the dependency's fault, not retried.
    Final(reqwest::Response),
    Retry(Failure, Option<Duration>),
}

/// One dependency's guard; share it (`Arc`) between every caller.
pub struct OutboundGuard {
    client: reqwest::Client,
    config: GuardConfig,
    slots: Arc<Semaphore>,
    breaker: ClockedBreaker,
    budget: Mutex<RetryTokens>,
    rng: Mutex<SplitMix64>,
}

impl OutboundGuard {
    pub fn new(client: reqwest::Client, config: GuardConfig) -> OutboundGuard {
        OutboundGuard {
            client,
            slots: Arc::new(Semaphore::new(config.slots)),
            breaker: ClockedBreaker::new(config.breaker, Instant::now(), config.time_scale),
            budget: Mutex::new(RetryTokens::new(
                config.budget_max,
                config.budget_per_first_try,
            )),
            rng: Mutex::new(SplitMix64::new(config.seed)),
            config,
        }
    }

    // ANCHOR: guard
    /// `GET url` through every layer. A success, or a 4xx other than 429,
    /// comes back as the response; everything else as a `GuardError`.
    pub async fn get(&self, url: &str) -> Result<reqwest::Response, GuardError> {
        // 1. The bulkhead: held for the whole logical call, retries included.
        let slot = tokio::time::timeout(self.config.slot_wait, self.slots.acquire());
        let Ok(Ok(_slot)) = slot.await else {
            return Err(GuardError::BulkheadFull);
        };
        // 2. The breaker: one call per user request, around all its retries.
        // It records how the whole call ended, so a failed attempt that a
        // retry made good is a success in its window.
        let whole_call = self.breaker.around(self.retrying(url), Result::is_ok);
        whole_call.await.unwrap_or(Err(GuardError::BreakerOpen))
    }

    /// The retries, each paid for from the budget, and every attempt with
    /// its own timeout.
    async fn retrying(&self, url: &str) -> Result<reqwest::Response, GuardError> {
        self.budget.lock().expect("no panic holds it").earn();
        let mut last = Failure::Transport;
        for attempt in 0..=self.config.retries {
            if attempt > 0 {
                // 3. A retry: paid from the budget, after a pause.
                if !self.budget.lock().expect("no panic holds it").try_spend() {
                    return Err(GuardError::BudgetSpent(last));
                }
            }
            // 4. The attempt, with its own timeout.
            match self.attempt(url).await {
                Attempt::Success(response) | Attempt::Final(response) => return Ok(response),
                Attempt::Retry(failure, asked) => {
                    last = failure;
                    if attempt == self.config.retries {
                        break;
                    }
                    let pause = match asked {
                        Some(wait) if wait > self.config.retry_after_cap => {
                            return Err(GuardError::RetryAfterTooLong(wait));
                        }
                        Some(wait) => wait,
                        None => self.jittered(attempt + 1),
                    };
                    tokio::time::sleep(pause).await;
                }
            }
        }
        Err(GuardError::Failed(last))
    }
    // ANCHOR_END: guard

    async fn attempt(&self, url: &str) -> Attempt {
        let sent = self
            .client
            .get(url)
            .timeout(self.config.attempt_timeout)
            .send();
        match sent.await {
            Ok(response) => {
                let status = response.status();
                if status.is_success() {
                    Attempt::Success(response)
                } else if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
                    let asked = response
                        .headers()
                        .get(RETRY_AFTER)
                        .and_then(|value| value.to_str().ok())
                        .and_then(|text| text.trim().parse::<u64>().ok())
                        .map(|seconds| {
                            Duration::from_secs(seconds).div_f64(self.config.time_scale)
                        });
                    Attempt::Retry(Failure::Status(status.as_u16()), asked)
                } else {
                    Attempt::Final(response)
                }
            }
            Err(error) if error.is_timeout() => Attempt::Retry(Failure::TimedOut, None),
            Err(_) => Attempt::Retry(Failure::Transport, None),
        }
    }

    fn jittered(&self, retry: u32) -> Duration {
        let mut rng = self.rng.lock().expect("no panic holds it");
        full_jitter(
            retry,
            self.config.backoff_base,
            self.config.backoff_cap,
            &mut rng,
        )
    }
}
