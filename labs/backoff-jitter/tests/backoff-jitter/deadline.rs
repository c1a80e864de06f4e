//! A deadline over the whole retry series, against a dependency out for
//! three times the caller's budget. Per-attempt timeouts alone let a caller
//! wait for all its attempts; a deadline ends the series near the budget;
//! a deadline that refuses a wait it cannot afford also refuses a
//! Retry-After beyond it, where one that sleeps through it fails after it.
//! Margins: a busy machine makes calls slower, never faster, so the upper
//! bounds get slack and the lower bounds none.

use lab_backoff_jitter::{Config, deadline};
use lab_kit::{Lab, Mode, Output};

use crate::number;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_bounds_the_series_and_refuses_a_wait_it_cannot_afford() {
    let config = Config::for_mode(Mode::Quick);
    let mut out = Output::collect();
    deadline::run(&config, &mut out)
        .await
        .expect("the deadline part runs");
    let budget = config.deadline_budget_ms as f64;
    let callers = config.deadline_callers as f64;
    let at = |outage: &str, bound: &str, field: &str| {
        number(&out, &format!("deadline/{outage}/{bound}"), field)
    };

    // A dependency that hangs: every attempt times out.
    let attempts = f64::from(config.max_attempts);
    let per_attempt = config.deadline_per_attempt_ms as f64;
    assert_eq!(at("hangs", "per-attempt-only", "gave_up_at_deadline"), 0.0);
    assert_eq!(
        at("hangs", "per-attempt-only", "attempts_exhausted"),
        callers
    );
    assert!(at("hangs", "per-attempt-only", "p50_ms") >= attempts * per_attempt);
    assert_eq!(at("hangs", "deadline", "gave_up_at_deadline"), callers);
    assert_eq!(
        at("hangs", "deadline-refuses-wait", "gave_up_at_deadline"),
        callers
    );
    assert!(at("hangs", "deadline-refuses-wait", "max_ms") <= budget + 300.0);
    assert!(
        at("hangs", "deadline-refuses-wait", "max_ms") < at("hangs", "per-attempt-only", "p50_ms")
    );

    // 503 with a Retry-After beyond the budget.
    let outage = config.deadline_outage_ms as f64;
    assert_eq!(at("retry-after", "per-attempt-only", "answered"), callers);
    assert!(at("retry-after", "per-attempt-only", "p50_ms") >= outage - 1000.0);
    assert_eq!(at("retry-after", "deadline", "answered"), 0.0);
    assert_eq!(at("retry-after", "deadline", "attempts_mean"), 1.0);
    assert!(at("retry-after", "deadline", "p50_ms") >= outage - 1000.0);
    assert_eq!(
        at(
            "retry-after",
            "deadline-refuses-wait",
            "gave_up_at_deadline"
        ),
        callers
    );
    assert!(at("retry-after", "deadline-refuses-wait", "max_ms") < budget);
}
