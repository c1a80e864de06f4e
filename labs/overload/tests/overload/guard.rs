//! The outbound guard, one layer at a time, against small scripted servers
//! on 127.0.0.1.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    Router,
    extract::State,
    http::{StatusCode, header::RETRY_AFTER},
    response::{IntoResponse, Response},
    routing::get,
};
use lab_kit::{
    gauge::Gauge,
    server::{RunningServer, spawn_axum},
};
use lab_overload::guard::{Failure, GuardConfig, GuardError, OutboundGuard};
use overload_sim::breaker::BreakerConfig;
use tokio::time::Instant;

/// What the server answers to its n-th request (the last entry repeats);
/// `None` hangs for a minute.
struct Script {
    answers: Vec<Option<(u16, Option<&'static str>)>>,
    seen: AtomicUsize,
    inside: Gauge,
}

async fn scripted(State(script): State<Arc<Script>>) -> Response {
    let _inside = script.inside.enter();
    let index = script.seen.fetch_add(1, Ordering::SeqCst);
    let answer = script.answers[index.min(script.answers.len() - 1)];
    match answer {
        None => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            StatusCode::OK.into_response()
        }
        Some((status, retry_after)) => {
            let status = StatusCode::from_u16(status).expect("a valid status");
            match retry_after {
                Some(seconds) => (status, [(RETRY_AFTER, seconds)]).into_response(),
                None => status.into_response(),
            }
        }
    }
}

async fn serve(answers: Vec<Option<(u16, Option<&'static str>)>>) -> (RunningServer, Arc<Script>) {
    let script = Arc::new(Script {
        answers,
        seen: AtomicUsize::new(0),
        inside: Gauge::new(),
    });
    let app = Router::new()
        .route("/", get(scripted))
        .with_state(Arc::clone(&script));
    (spawn_axum(app).await.expect("the server starts"), script)
}

fn config() -> GuardConfig {
    GuardConfig {
        slots: 4,
        slot_wait: Duration::from_millis(200),
        attempt_timeout: Duration::from_millis(200),
        retries: 2,
        backoff_base: Duration::from_millis(10),
        backoff_cap: Duration::from_millis(50),
        retry_after_cap: Duration::from_secs(2),
        budget_per_first_try: 0.1,
        budget_max: 10.0,
        // Never opens unless a test says so.
        breaker: BreakerConfig {
            window: 100,
            min_calls: 100,
            failure_rate: 1.0,
            open_ms: 60_000,
            half_open_probes: 1,
        },
        time_scale: 1.0,
        seed: 7,
    }
}

fn guard(config: GuardConfig) -> Arc<OutboundGuard> {
    Arc::new(OutboundGuard::new(reqwest::Client::new(), config))
}

#[tokio::test]
async fn each_attempt_times_out_and_the_call_ends_after_the_last() {
    let (server, script) = serve(vec![None]).await;
    let started = Instant::now();
    let outcome = guard(config()).get(&server.url("/")).await;
    assert_eq!(outcome.unwrap_err(), GuardError::Failed(Failure::TimedOut));
    assert_eq!(
        script.seen.load(Ordering::SeqCst),
        3,
        "the first try and two retries"
    );
    // Three timeouts of 200 ms and two short pauses: well under a second.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

/// One call through a guard with the test's config to a server that gives
/// `answers`: the status the call ended with, and how many tries the server saw.
async fn answered(answers: Vec<Option<(u16, Option<&'static str>)>>) -> (u16, usize) {
    let (server, script) = serve(answers).await;
    let response = guard(config())
        .get(&server.url("/"))
        .await
        .expect("the call ends with an answer");
    (
        response.status().as_u16(),
        script.seen.load(Ordering::SeqCst),
    )
}

#[tokio::test]
async fn retries_carry_a_call_past_two_server_errors() {
    let answers = vec![Some((500, None)), Some((503, None)), Some((200, None))];
    assert_eq!(answered(answers).await, (200, 3), "the third try answers");
}

#[tokio::test]
async fn a_client_error_is_returned_and_not_retried() {
    assert_eq!(answered(vec![Some((404, None))]).await, (404, 1));
}

#[tokio::test]
async fn retry_after_is_waited_for_and_a_longer_one_ends_the_call() {
    let started = Instant::now();
    let answers = vec![Some((429, Some("1"))), Some((200, None))];
    assert_eq!(
        answered(answers).await,
        (200, 2),
        "the try after the wait answers"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );

    let (server, script) = serve(vec![Some((503, Some("30")))]).await;
    let outcome = guard(config()).get(&server.url("/")).await;
    assert_eq!(
        outcome.unwrap_err(),
        GuardError::RetryAfterTooLong(Duration::from_secs(30))
    );
    assert_eq!(script.seen.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_budget_stops_retries_once_spent() {
    let (server, script) = serve(vec![Some((500, None))]).await;
    let guard = guard(GuardConfig {
        budget_per_first_try: 0.0,
        budget_max: 2.0,
        ..config()
    });
    // The first call spends both tokens on its two retries.
    let first = guard.get(&server.url("/")).await;
    assert_eq!(first.unwrap_err(), GuardError::Failed(Failure::Status(500)));
    assert_eq!(script.seen.load(Ordering::SeqCst), 3);
    // The second gets its first try only.
    let second = guard.get(&server.url("/")).await;
    assert_eq!(
        second.unwrap_err(),
        GuardError::BudgetSpent(Failure::Status(500))
    );
    assert_eq!(script.seen.load(Ordering::SeqCst), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bulkhead_bounds_calls_in_flight_and_refuses_past_its_wait() {
    let (server, script) = serve(vec![None]).await;
    let guard = guard(GuardConfig {
        slots: 2,
        retries: 0,
        attempt_timeout: Duration::from_secs(2),
        slot_wait: Duration::from_millis(300),
        ..config()
    });
    let url = server.url("/");
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let (guard, url) = (Arc::clone(&guard), url.clone());
            tokio::spawn(async move { guard.get(&url).await })
        })
        .collect();
    let mut refused = 0;
    for call in calls {
        if matches!(
            call.await.expect("the call task"),
            Err(GuardError::BulkheadFull)
        ) {
            refused += 1;
        }
    }
    assert_eq!(refused, 4, "two got a slot, four waited 300 ms and gave up");
    assert_eq!(script.inside.peak(), 2);
}

#[tokio::test]
async fn an_open_breaker_fails_fast_without_calling() {
    let (server, script) = serve(vec![Some((500, None))]).await;
    let guard = guard(GuardConfig {
        retries: 0,
        breaker: BreakerConfig {
            window: 4,
            min_calls: 4,
            failure_rate: 0.5,
            open_ms: 60_000,
            half_open_probes: 1,
        },
        ..config()
    });
    for _ in 0..4 {
        let outcome = guard.get(&server.url("/")).await;
        assert_eq!(
            outcome.unwrap_err(),
            GuardError::Failed(Failure::Status(500))
        );
    }
    let started = Instant::now();
    assert_eq!(
        guard.get(&server.url("/")).await.unwrap_err(),
        GuardError::BreakerOpen
    );
    assert!(started.elapsed() < Duration::from_millis(50));
    assert_eq!(
        script.seen.load(Ordering::SeqCst),
        4,
        "the open breaker did not call"
    );
}

#[tokio::test]
async fn a_blip_the_retries_absorb_never_counts_against_the_breaker() {
    // Every call's first try fails and its retry succeeds: a blip.
    let blip = [Some((503, None)), Some((200, None))];
    let (server, script) = serve(blip.repeat(6)).await;
    let guard = guard(GuardConfig {
        breaker: BreakerConfig {
            window: 4,
            min_calls: 4,
            failure_rate: 0.5,
            open_ms: 60_000,
            half_open_probes: 1,
        },
        ..config()
    });
    // Around each attempt, the window would read fail, ok, fail, ok after
    // two calls and open at 50 %; around the whole call it reads ok, ok, ...
    for call in 0..6 {
        let response = guard.get(&server.url("/")).await;
        assert_eq!(
            response.map(|response| response.status().as_u16()),
            Ok(200),
            "call {call}"
        );
    }
    assert_eq!(script.seen.load(Ordering::SeqCst), 12, "two tries a call");
}
