//! The retry policy the chapter builds: per-attempt timeout, total deadline,
//! classification, idempotency, capped exponential backoff with full jitter,
//! Retry-After honoured, and a token-bucket retry budget shared by all callers.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use backoff_sim::{Strategy, backoff_ms};
use reqwest::{Method, Request, StatusCode, header::HeaderMap};
use seeded_rng::SplitMix64;

/// The header a caller sets on a POST to say "this is safe to send twice".
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

// ANCHOR: policy
/// How one logical call may be retried.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts in all, the first one included.
    pub max_attempts: u32,
    /// Each attempt, headers and body, must finish within this.
    pub per_attempt_timeout: Duration,
    /// The whole call, retries and sleeps included, must finish within this:
    /// the number the caller actually experiences.
    pub total_deadline: Duration,
    /// Backoff: `base * 2^n`, capped, shaped by `strategy`.
    pub base: Duration,
    pub cap: Duration,
    pub strategy: Strategy,
    /// Wait at least as long as the server's Retry-After asks.
    pub honour_retry_after: bool,
    /// Give up at once when the next wait (backoff or Retry-After) would end
    /// past the deadline, rather than sleep through it and fail after.
    pub refuse_waits_past_deadline: bool,
    /// Shared by every call of a client: retries spend tokens that only
    /// first attempts earn.
    pub budget: Option<Arc<RetryBudget>>,
}
// ANCHOR_END: policy

/// What came of one attempt, as the policy sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptOutcome {
    Status(u16),
    Timeout,
    Connect,
    Reset,
    OtherError,
}

/// Why a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// A 2xx, or a final answer that is not worth retrying (a 404, say).
    Answered,
    /// The attempt failed and the failure is not retryable (or the request is
    /// not safe to repeat).
    NotRetryable,
    /// Every attempt allowed was spent.
    AttemptsExhausted,
    /// The next sleep (or the Retry-After asked for) would end past the deadline.
    DeadlineReached,
    /// The retry budget had no token left.
    BudgetEmpty,
}

/// The record of one logical call.
#[derive(Debug, Clone)]
pub struct CallReport {
    pub attempts: u32,
    pub last: AttemptOutcome,
    pub ending: Ending,
    pub elapsed: Duration,
    /// Sleeps that were set by a Retry-After header.
    pub retry_after_waits: u32,
}

impl CallReport {
    pub fn succeeded(&self) -> bool {
        matches!(self.last, AttemptOutcome::Status(code) if (200..300).contains(&code))
    }
}

// ANCHOR: classify
/// What to do after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    Done,
    Retry,
    Stop,
}

/// Transient failures are worth another try; a request the server understood
/// and refused (400, 401, 403, 404, 422, ...) will be refused again.
pub fn classify(outcome: &AttemptOutcome) -> NextStep {
    match outcome {
        AttemptOutcome::Status(code) if (200..300).contains(code) => NextStep::Done,
        // Throttled, or a gateway or the service itself is briefly unavailable.
        AttemptOutcome::Status(429 | 502 | 503 | 504) => NextStep::Retry,
        AttemptOutcome::Status(_) => NextStep::Stop,
        // The attempt never got an answer: nothing was decided, try again.
        AttemptOutcome::Timeout | AttemptOutcome::Connect | AttemptOutcome::Reset => {
            NextStep::Retry
        }
        AttemptOutcome::OtherError => NextStep::Stop,
    }
}

/// A request may be sent twice only if sending it twice cannot do twice the
/// harm: idempotent methods, or a POST/PATCH that carries an Idempotency-Key
/// the server deduplicates on.
pub fn safe_to_repeat(method: &Method, headers: &HeaderMap) -> bool {
    match *method {
        Method::GET | Method::HEAD | Method::PUT | Method::DELETE | Method::OPTIONS => true,
        _ => headers.contains_key(IDEMPOTENCY_KEY),
    }
}
// ANCHOR_END: classify

// ANCHOR: retry_after
/// Parses `Retry-After` in both forms RFC 9110 allows: delay-seconds
/// (`Retry-After: 2`) or an HTTP-date (`Retry-After: Sun, 29 Nov 2026 18:09:02 GMT`),
/// as the time still to wait from `now`. A date in the past means "now".
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}
// ANCHOR_END: retry_after

/// The wait a response's `Retry-After` header asks for, if it has a valid one.
pub fn retry_after_of(response: &reqwest::Response) -> Option<Duration> {
    response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| parse_retry_after(value, SystemTime::now()))
}

// ANCHOR: budget
/// A token bucket for retries, shared by every call a client makes: each
/// first attempt deposits `ratio` of a token, each retry withdraws a whole
/// one. In a storm every call fails, deposits stop covering withdrawals, and
/// retries stop at about `ratio` of the traffic instead of multiplying it.
#[derive(Debug)]
pub struct RetryBudget {
    /// Thousandths of a token, so the accounting is exact integers.
    state: Mutex<BudgetState>,
    deposit_milli: u64,
    max_milli: u64,
}

#[derive(Debug)]
struct BudgetState {
    tokens_milli: u64,
    retries_allowed: u64,
    retries_refused: u64,
}

impl RetryBudget {
    /// `ratio`: retries allowed per first attempt (0.1 = 10 %); `initial`:
    /// whole tokens at start (a little slack for a quiet client), also the cap.
    pub fn new(ratio: f64, initial: u32) -> RetryBudget {
        let max_milli = u64::from(initial.max(1)) * 1000;
        RetryBudget {
            state: Mutex::new(BudgetState {
                tokens_milli: u64::from(initial) * 1000,
                retries_allowed: 0,
                retries_refused: 0,
            }),
            deposit_milli: (ratio.clamp(0.0, 1.0) * 1000.0).round() as u64,
            max_milli,
        }
    }

    // A std Mutex, not a tokio one: the lock is held for a few integer
    // operations and never across an .await.
    fn with_state<T>(&self, change: impl FnOnce(&mut BudgetState) -> T) -> T {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        change(&mut state)
    }

    /// Called once per logical call, before its first attempt.
    pub fn deposit(&self) {
        let (deposit, max) = (self.deposit_milli, self.max_milli);
        self.with_state(|state| state.tokens_milli = (state.tokens_milli + deposit).min(max));
    }

    /// Called before every retry; false means "do not retry".
    pub fn try_withdraw(&self) -> bool {
        self.with_state(|state| {
            if state.tokens_milli >= 1000 {
                state.tokens_milli -= 1000;
                state.retries_allowed += 1;
                true
            } else {
                state.retries_refused += 1;
                false
            }
        })
    }

    /// (retries allowed, retries refused) so far.
    pub fn counts(&self) -> (u64, u64) {
        self.with_state(|state| (state.retries_allowed, state.retries_refused))
    }
}
// ANCHOR_END: budget

/// Turns a reqwest error into the policy's vocabulary. A reset shows up as
/// an I/O error somewhere down the error's source chain.
fn outcome_of_error(error: &reqwest::Error) -> AttemptOutcome {
    if error.is_timeout() {
        return AttemptOutcome::Timeout;
    }
    if error.is_connect() {
        return AttemptOutcome::Connect;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(
                io.kind(),
                ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
            ) {
                return AttemptOutcome::Reset;
            }
        }
        if let Some(hyper_error) = cause.downcast_ref::<hyper::Error>()
            && (hyper_error.is_incomplete_message() || hyper_error.is_closed())
        {
            return AttemptOutcome::Reset;
        }
        source = cause.source();
    }
    AttemptOutcome::OtherError
}

/// One attempt: send, read the whole body (so the connection can go back to
/// the pool), all within `limit`.
async fn attempt(
    client: &reqwest::Client,
    request: Request,
    limit: Duration,
) -> (AttemptOutcome, Option<Duration>) {
    let exchange = async {
        let response = client.execute(request).await?;
        let status = response.status();
        let retry_after = retry_after_of(&response);
        response.bytes().await?;
        Ok::<_, reqwest::Error>((status, retry_after))
    };
    match tokio::time::timeout(limit, exchange).await {
        Err(_elapsed) => (AttemptOutcome::Timeout, None),
        Ok(Err(error)) => (outcome_of_error(&error), None),
        Ok(Ok((status, retry_after))) => {
            let wants_wait = matches!(
                status,
                StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
            );
            (
                AttemptOutcome::Status(status.as_u16()),
                retry_after.filter(|_| wants_wait),
            )
        }
    }
}

// ANCHOR: send
/// Sends `request` under `policy`. `rng` draws the jitter (one per caller,
/// seeded, so a run can be repeated).
pub async fn send_with_retries(
    client: &reqwest::Client,
    request: Request,
    policy: &RetryPolicy,
    rng: &mut SplitMix64,
) -> CallReport {
    let started = Instant::now();
    let deadline = started + policy.total_deadline;
    let repeatable = safe_to_repeat(request.method(), request.headers());
    if let Some(budget) = &policy.budget {
        budget.deposit();
    }
    let mut report = CallReport {
        attempts: 0,
        last: AttemptOutcome::OtherError,
        ending: Ending::AttemptsExhausted,
        elapsed: Duration::ZERO,
        retry_after_waits: 0,
    };
    let mut previous_sleep_ms = policy.base.as_secs_f64() * 1000.0;
    let mut next = Some(request);
    while let Some(current) = next.take() {
        // Keep a copy for the retry before this one is consumed; a streaming
        // body cannot be copied, and then there is no retry.
        let spare = current.try_clone();
        // No attempt may outlive the deadline: the last one gets what is left.
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            report.ending = Ending::DeadlineReached;
            break;
        }
        let (outcome, retry_after) =
            attempt(client, current, policy.per_attempt_timeout.min(remaining)).await;
        report.attempts += 1;
        report.last = outcome;
        match classify(&report.last) {
            NextStep::Done => {
                report.ending = Ending::Answered;
                break;
            }
            NextStep::Stop => {
                report.ending = if matches!(report.last, AttemptOutcome::Status(_)) {
                    Ending::Answered
                } else {
                    Ending::NotRetryable
                };
                break;
            }
            NextStep::Retry if !repeatable => {
                // A POST without a key may have been applied already: never resend.
                report.ending = Ending::NotRetryable;
                break;
            }
            NextStep::Retry => {}
        }
        if report.attempts >= policy.max_attempts {
            report.ending = Ending::AttemptsExhausted;
            break;
        }
        // Capped exponential with the policy's jitter: the very function the
        // simulation uses (attempt 1 is the first retry).
        let jittered_ms = backoff_ms(
            policy.strategy,
            report.attempts,
            policy.base.as_secs_f64() * 1000.0,
            policy.cap.as_secs_f64() * 1000.0,
            previous_sleep_ms,
            rng,
        );
        previous_sleep_ms = jittered_ms;
        let mut sleep = Duration::from_secs_f64(jittered_ms / 1000.0);
        if let (true, Some(asked)) = (policy.honour_retry_after, retry_after) {
            // The server said when: never earlier. The jitter goes on top, so
            // the clients it answered together do not return together.
            sleep = asked + sleep;
            report.retry_after_waits += 1;
        }
        // Sleeping past the deadline only to fail later helps nobody: fail now.
        if policy.refuse_waits_past_deadline && Instant::now() + sleep >= deadline {
            report.ending = Ending::DeadlineReached;
            break;
        }
        if let Some(budget) = &policy.budget
            && !budget.try_withdraw()
        {
            report.ending = Ending::BudgetEmpty;
            break;
        }
        tokio::time::sleep(sleep).await;
        next = spare;
        if next.is_none() {
            report.ending = Ending::NotRetryable;
        }
    }
    report.elapsed = started.elapsed();
    report
}
// ANCHOR_END: send

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_both_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_975_742);
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(5));
        assert_eq!(parse_retry_after(&later, now), Some(Duration::from_secs(5)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(5));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn classification() {
        for code in [400, 401, 403, 404, 422] {
            assert_eq!(classify(&AttemptOutcome::Status(code)), NextStep::Stop);
        }
        for code in [429, 502, 503, 504] {
            assert_eq!(classify(&AttemptOutcome::Status(code)), NextStep::Retry);
        }
        assert_eq!(classify(&AttemptOutcome::Timeout), NextStep::Retry);
        assert_eq!(classify(&AttemptOutcome::Status(200)), NextStep::Done);
        let mut headers = HeaderMap::new();
        assert!(safe_to_repeat(&Method::GET, &headers));
        assert!(!safe_to_repeat(&Method::POST, &headers));
        headers.insert(
            IDEMPOTENCY_KEY,
            "k-1".parse().expect("a valid header value"),
        );
        assert!(safe_to_repeat(&Method::POST, &headers));
    }

    #[test]
    fn the_budget_refuses_past_its_ratio() {
        let budget = RetryBudget::new(0.1, 2);
        for _ in 0..100 {
            budget.deposit();
        }
        // Capped at 2 tokens: a long quiet spell does not bank a storm's worth.
        let allowed = (0..50).filter(|_| budget.try_withdraw()).count();
        assert_eq!(allowed, 2);
        // 15 deposits of a tenth are one and a half tokens: one retry.
        for _ in 0..15 {
            budget.deposit();
        }
        assert_eq!((0..50).filter(|_| budget.try_withdraw()).count(), 1);
        assert_eq!(budget.counts(), (3, 97));
    }
}
