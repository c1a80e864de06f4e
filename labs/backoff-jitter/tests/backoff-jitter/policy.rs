//! The retry policy against the live flaky dependency on 127.0.0.1: what it
//! must never do (retry a 4xx, resend a keyless POST, come back before
//! Retry-After, outlive its deadline, exceed its budget), each checked beside
//! a case where the same setup does retry, so every test can fail.

use std::{sync::Arc, time::Duration};

use axum::http::StatusCode;
use backoff_sim::Strategy;
use lab_backoff_jitter::{
    flaky::{self, FlakyConfig, Recorder, RetryAfterForm},
    live::{ScenarioRun, client, run_scenario},
    policy::{
        AttemptOutcome, Ending, IDEMPOTENCY_KEY, RetryBudget, RetryPolicy, send_with_retries,
    },
};
use lab_kit::server::{RunningServer, spawn_axum};
use seeded_rng::SplitMix64;

/// GETs of `path` by `callers` callers with `retrying`, against a dependency
/// that fails as `flaky_config` says; `seed` seeds the callers' jitter.
async fn get_from(
    flaky_config: FlakyConfig,
    retrying: &RetryPolicy,
    callers: usize,
    path: &str,
    seed: u64,
) -> ScenarioRun {
    run_scenario(
        flaky_config,
        retrying,
        callers,
        reqwest::Method::GET,
        path,
        false,
        seed,
    )
    .await
    .expect("scenario runs")
}

fn policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        per_attempt_timeout: Duration::from_secs(2),
        total_deadline: Duration::from_secs(10),
        base: Duration::from_millis(1),
        cap: Duration::from_millis(4),
        strategy: Strategy::FullJitter,
        honour_retry_after: true,
        refuse_waits_past_deadline: true,
        budget: None,
    }
}

fn always_down() -> FlakyConfig {
    FlakyConfig {
        outage: Duration::from_secs(3600),
        ..FlakyConfig::default()
    }
}

/// A dependency that stays down, on 127.0.0.1, with the recorder of what
/// reached it and a client for it.
async fn always_down_server() -> (Arc<Recorder>, RunningServer, reqwest::Client) {
    let recorder = Recorder::new(always_down());
    let server = spawn_axum(flaky::app(Arc::clone(&recorder)))
        .await
        .expect("server starts");
    (recorder, server, client().expect("client"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_retryable_statuses_are_never_retried() {
    let (recorder, server, http) = always_down_server().await;
    let mut rng = SplitMix64::new(1);
    for code in [400u16, 401, 403, 404, 422, 503] {
        let before = recorder.arrivals().len();
        let request = http
            .get(server.url(&format!("/status/{code}")))
            .build()
            .expect("request");
        let report = send_with_retries(&http, request, &policy(4), &mut rng).await;
        let seen = recorder.arrivals().len() - before;
        if code == 503 {
            // The same policy, a retryable status: every attempt is spent.
            assert_eq!(seen, 4, "503 should be retried");
            assert_eq!(report.ending, Ending::AttemptsExhausted);
        } else {
            assert_eq!(seen, 1, "{code} was sent {seen} times");
            assert_eq!(report.attempts, 1);
            assert_eq!(report.ending, Ending::Answered);
        }
    }
    server.stop(Duration::from_secs(1)).await.expect("stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_without_a_key_is_never_retried() {
    let (recorder, server, http) = always_down_server().await;
    let mut rng = SplitMix64::new(2);
    for method in [reqwest::Method::POST, reqwest::Method::PATCH] {
        let before = recorder.arrivals().len();
        let request = http
            .request(method.clone(), server.url("/charge"))
            .build()
            .expect("request");
        let report = send_with_retries(&http, request, &policy(5), &mut rng).await;
        assert_eq!(
            recorder.arrivals().len() - before,
            1,
            "{method} without a key"
        );
        assert_eq!(report.ending, Ending::NotRetryable);
    }
    // With a key the same POST is retried, and every attempt carries the key.
    let before = recorder.arrivals().len();
    let request = http
        .post(server.url("/charge"))
        .header(IDEMPOTENCY_KEY, "order-42")
        .body("amount=10")
        .build()
        .expect("request");
    send_with_retries(&http, request, &policy(5), &mut rng).await;
    let keyed = &recorder.arrivals()[before..];
    assert_eq!(keyed.len(), 5);
    assert!(
        keyed
            .iter()
            .all(|arrival| arrival.idempotency_key.as_deref() == Some("order-42"))
    );
    server.stop(Duration::from_secs(1)).await.expect("stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_honoured_in_both_forms() {
    for (form, status) in [
        (RetryAfterForm::Seconds, StatusCode::SERVICE_UNAVAILABLE),
        (RetryAfterForm::HttpDate, StatusCode::TOO_MANY_REQUESTS),
    ] {
        let flaky_config = FlakyConfig {
            outage: Duration::from_millis(700),
            failure_status: status,
            retry_after: form,
            ..FlakyConfig::default()
        };
        let mut retrying = policy(6);
        retrying.base = Duration::from_millis(20);
        retrying.cap = Duration::from_millis(200);
        let run = get_from(flaky_config, &retrying, 20, "/item", 3).await;
        let early = run.arrivals.iter().filter(|arrival| arrival.early).count();
        assert_eq!(
            early, 0,
            "{form:?}: {early} attempts came before Retry-After"
        );
        assert!(run.arrivals.len() > 20, "{form:?}: nobody retried");
        assert!(
            run.reports.iter().all(|report| report.succeeded()),
            "{form:?}"
        );
        assert!(
            run.reports
                .iter()
                .all(|report| report.retry_after_waits >= 1)
        );

        // The same callers ignoring the header do come back early: the check
        // above can see a violation when there is one.
        retrying.honour_retry_after = false;
        let run = get_from(flaky_config, &retrying, 20, "/item", 3).await;
        assert!(run.arrivals.iter().any(|arrival| arrival.early), "{form:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_total_deadline_is_never_exceeded() {
    let deadline = Duration::from_millis(600);
    // Timer and scheduling slop on a busy 2-core machine; the policy itself
    // never starts a sleep or an attempt that ends past the deadline.
    let slack = Duration::from_millis(150);
    let mut bounded = policy(10);
    bounded.per_attempt_timeout = Duration::from_millis(250);
    bounded.total_deadline = deadline;
    bounded.base = Duration::from_millis(20);
    bounded.cap = Duration::from_millis(400);

    // A dependency that hangs: attempts time out and are retried, until the deadline.
    let run = get_from(FlakyConfig::default(), &bounded, 20, "/slow", 4).await;
    for report in &run.reports {
        assert!(report.elapsed <= deadline + slack, "{report:?}");
        assert!(report.attempts >= 2, "timeouts are retried: {report:?}");
    }
    // A dependency that asks for more time than is left: give up at once.
    let asks_too_much = FlakyConfig {
        outage: Duration::from_secs(3600),
        retry_after: RetryAfterForm::Seconds,
        ..FlakyConfig::default()
    };
    let run = get_from(asks_too_much, &bounded, 20, "/item", 5).await;
    for report in &run.reports {
        assert_eq!(report.ending, Ending::DeadlineReached, "{report:?}");
        assert_eq!(report.attempts, 1);
        assert!(report.elapsed < deadline, "{report:?}");
    }
    // Plain 503s with growing backoff: still within the deadline.
    let run = get_from(always_down(), &bounded, 20, "/item", 6).await;
    assert!(
        run.reports
            .iter()
            .all(|report| report.elapsed <= deadline + slack)
    );
    assert!(
        run.reports
            .iter()
            .any(|report| report.ending == Ending::DeadlineReached)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_caps_retries_at_its_ratio() {
    let callers = 200usize;
    let (ratio, initial) = (0.1, 5u32);
    let mut budgeted = policy(6);
    budgeted.budget = Some(Arc::new(RetryBudget::new(ratio, initial)));
    let run = get_from(always_down(), &budgeted, callers, "/item", 7).await;
    let retries = run.arrivals.len() - callers;
    let allowed = (ratio * callers as f64).floor() as usize + initial as usize;
    assert!(
        retries <= allowed,
        "{retries} retries, the budget allows {allowed}"
    );
    assert!(
        retries >= initial as usize,
        "the budget allowed only {retries} retries"
    );
    let (granted, refused) = budgeted.budget.as_ref().expect("a budget").counts();
    assert_eq!(granted as usize, retries);
    assert!(refused > 0);

    // Without the budget the same storm retries five times per caller.
    let run = get_from(always_down(), &policy(6), callers, "/item", 7).await;
    assert_eq!(run.arrivals.len() - callers, callers * 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_retried() {
    // A port held closed: every connect is refused at once.
    let closed = lab_kit::net::closed_loopback_port().expect("a closed loopback port");
    let port = closed.port();
    let http = client().expect("client");
    let request = http
        .get(format!("http://127.0.0.1:{port}/item"))
        .build()
        .expect("request");
    let mut rng = SplitMix64::new(8);
    let report = send_with_retries(&http, request, &policy(3), &mut rng).await;
    assert_eq!(report.last, AttemptOutcome::Connect, "{report:?}");
    assert_eq!(report.attempts, 3);
    assert_eq!(report.ending, Ending::AttemptsExhausted);
}
