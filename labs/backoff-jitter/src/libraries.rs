//! The retry libraries people reach for, on the same flaky dependency:
//! backon (with and without an `adjust` for Retry-After) and
//! reqwest-middleware with reqwest-retry, beside this lab's own policy.
//! Each is set up as its README suggests, with the same delays as ours
//! (50 ms first, 800 ms cap, 5 retries, jitter on).

use std::{sync::Arc, time::Duration};

use anyhow::{Context, Result};
use axum::http::StatusCode;
use backoff_sim::Strategy;
use backon::{ExponentialBuilder, Retryable};
use lab_kit::{Output, Series, concurrently::run_all, server::spawn_axum};
use seeded_rng::SplitMix64;
use serde::Serialize;

use crate::{
    Config,
    flaky::{self, FlakyConfig, Recorder, RetryAfterForm},
    live::client,
    policy::{RetryPolicy, retry_after_of, send_with_retries},
};

lab_kit::series! {
    /// The libraries compared.
    pub enum Library {
        /// This lab's `send_with_retries`.
        Ours => "lib-ours",
        /// backon's `ExponentialBuilder` with jitter, retrying every error.
        Backon => "lib-backon",
        /// The same, with `adjust` reading Retry-After and `when` refusing a keyless POST.
        BackonAdjusted => "lib-backon-adjust",
        /// reqwest-middleware + reqwest-retry's `RetryTransientMiddleware`.
        ReqwestRetry => "lib-reqwest-retry",
    }
}

const MIN_DELAY: Duration = Duration::from_millis(50);
const MAX_DELAY: Duration = Duration::from_millis(800);
const RETRIES: u32 = 5;

/// What a failed attempt tells backon: enough to decide and to wait.
#[derive(Debug)]
struct Failed {
    status: Option<StatusCode>,
    retry_after: Option<Duration>,
}

async fn backon_attempt(builder: reqwest::RequestBuilder) -> Result<(), Failed> {
    let response = builder.send().await.map_err(|_| Failed {
        status: None,
        retry_after: None,
    })?;
    let status = response.status();
    let retry_after = retry_after_of(&response);
    let _ = response.bytes().await;
    if status.is_success() {
        Ok(())
    } else {
        Err(Failed {
            status: Some(status),
            retry_after,
        })
    }
}

/// One call through `library`: `method` to `url`, tagged with the caller's id.
async fn call(
    library: Library,
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    caller: u64,
) -> Result<()> {
    let backoff = ExponentialBuilder::default()
        .with_jitter()
        .with_min_delay(MIN_DELAY)
        .with_max_delay(MAX_DELAY)
        .with_max_times(RETRIES as usize);
    let make = || {
        http.request(method.clone(), url)
            .header("x-client", caller.to_string())
    };
    match library {
        Library::Ours => {
            let policy = RetryPolicy {
                max_attempts: RETRIES + 1,
                per_attempt_timeout: Duration::from_secs(2),
                total_deadline: Duration::from_secs(8),
                base: MIN_DELAY / 2,
                cap: MAX_DELAY,
                strategy: Strategy::FullJitter,
                honour_retry_after: true,
                refuse_waits_past_deadline: true,
                budget: None,
            };
            let request = make().build().context("building a request")?;
            let mut rng = SplitMix64::new(caller);
            send_with_retries(http, request, &policy, &mut rng).await;
        }
        Library::Backon => {
            // What the README shows: wrap the call, pick a backoff, await.
            let _ = (|| backon_attempt(make())).retry(backoff).await;
        }
        // ANCHOR: backon_adjust
        Library::BackonAdjusted => {
            let safe = method != reqwest::Method::POST;
            let _ = (|| backon_attempt(make()))
                .retry(backoff)
                // Retry only what classification allows, and no keyless POST.
                .when(|failed: &Failed| {
                    safe && failed
                        .status
                        .is_none_or(|status| matches!(status.as_u16(), 429 | 502 | 503 | 504))
                })
                // The server's Retry-After, if any, replaces the computed delay
                // when it is longer.
                .adjust(|failed: &Failed, computed: Option<Duration>| {
                    match (computed, failed.retry_after) {
                        (Some(computed), Some(asked)) => Some(computed.max(asked)),
                        (computed, _) => computed,
                    }
                })
                .await;
        }
        // ANCHOR_END: backon_adjust
        Library::ReqwestRetry => {
            let policy = reqwest_retry::policies::ExponentialBackoff::builder()
                .retry_bounds(MIN_DELAY, MAX_DELAY)
                .build_with_max_retries(RETRIES);
            let client = reqwest_middleware::ClientBuilder::new(http.clone())
                .with(reqwest_retry::RetryTransientMiddleware::new_with_policy(
                    policy,
                ))
                .build();
            let response = client
                .request(method, url)
                .header("x-client", caller.to_string())
                .send()
                .await;
            if let Ok(response) = response {
                let _ = response.bytes().await;
            }
        }
    }
    Ok(())
}

/// One library on the flaky dependency.
#[derive(Debug, Clone, Serialize)]
pub struct LibrarySummary {
    pub library: String,
    pub callers: usize,
    /// GETs through a 1 s outage of 503s that carry `Retry-After: 1`.
    pub get_calls: u64,
    pub get_calls_per_caller: f64,
    /// Attempts the server saw before its Retry-After allowed them.
    pub early_attempts: u64,
    pub honours_retry_after: bool,
    /// One POST without an Idempotency-Key to an endpoint that answers 503.
    pub keyless_post_calls: u64,
    pub retries_keyless_post: bool,
}

async fn measure(library: Library, callers: usize) -> Result<LibrarySummary> {
    let http = client()?;
    // GETs through the outage.
    let recorder = Recorder::new(FlakyConfig {
        outage: Duration::from_millis(1000),
        retry_after: RetryAfterForm::Seconds,
        ..FlakyConfig::default()
    });
    let server = spawn_axum(flaky::app(Arc::clone(&recorder))).await?;
    let url = server.url("/item");
    let mut tasks = tokio::task::JoinSet::new();
    for caller in 0..callers as u64 {
        let (http, url) = (http.clone(), url.clone());
        tasks.spawn(async move { call(library, &http, reqwest::Method::GET, &url, caller).await });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.context("a caller panicked")??;
    }
    server.stop(Duration::from_secs(1)).await?;
    let arrivals = recorder.arrivals();
    let early = arrivals.iter().filter(|arrival| arrival.early).count() as u64;

    // One keyless POST to an endpoint that stays down.
    let down = Recorder::new(FlakyConfig {
        outage: Duration::from_secs(3600),
        ..FlakyConfig::default()
    });
    let server = spawn_axum(flaky::app(Arc::clone(&down))).await?;
    call(
        library,
        &http,
        reqwest::Method::POST,
        &server.url("/charge"),
        0,
    )
    .await?;
    server.stop(Duration::from_secs(1)).await?;
    let post_calls = down.arrivals().len() as u64;

    Ok(LibrarySummary {
        library: library.series().trim_start_matches("lib-").to_string(),
        callers,
        get_calls: arrivals.len() as u64,
        get_calls_per_caller: arrivals.len() as f64 / callers as f64,
        early_attempts: early,
        honours_retry_after: early == 0,
        keyless_post_calls: post_calls,
        retries_keyless_post: post_calls > 1,
    })
}

/// Every library, measured side by side (concurrently: each has its own server).
pub async fn compare(config: &Config, out: &mut Output) -> Result<()> {
    eprintln!(
        "backoff-jitter: retry libraries, {} callers each",
        config.library_clients
    );
    let callers = config.library_clients;
    let measured = run_all(Library::ALL, Library::series, |library| {
        measure(library, callers)
    })
    .await?;
    for (library, summary) in measured {
        out.write_summary(&library.series(), &summary)?;
    }
    Ok(())
}
