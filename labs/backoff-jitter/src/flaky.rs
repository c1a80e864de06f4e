//! The flaky dependency: an axum app that fails for a known outage (503 or
//! 429, with or without Retry-After in either form), then recovers, and
//! records every request it sees, so the lab counts retries at the server.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use axum::{
    Router,
    extract::{Path, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header::RETRY_AFTER},
    response::{IntoResponse, Response},
    routing::{any, get},
};

/// How the dependency misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfterForm {
    /// No Retry-After header.
    Absent,
    /// `Retry-After: <seconds>`.
    Seconds,
    /// `Retry-After: <IMF-fixdate>`.
    HttpDate,
}

#[derive(Debug, Clone, Copy)]
pub struct FlakyConfig {
    /// `/item` and `/charge` fail from the server's start until this moment.
    pub outage: Duration,
    /// 503 (unavailable) or 429 (throttled).
    pub failure_status: StatusCode,
    pub retry_after: RetryAfterForm,
    /// How long `/slow` takes before it answers.
    pub slow_for: Duration,
}

impl Default for FlakyConfig {
    fn default() -> Self {
        FlakyConfig {
            outage: Duration::from_millis(1000),
            failure_status: StatusCode::SERVICE_UNAVAILABLE,
            retry_after: RetryAfterForm::Absent,
            slow_for: Duration::from_secs(5),
        }
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// Since the server started.
    pub at: Duration,
    pub path: String,
    pub method: Method,
    pub client: Option<u64>,
    pub idempotency_key: Option<String>,
    pub status: u16,
    /// The client arrived before the moment a Retry-After sent to it allowed.
    pub early: bool,
}

/// Shared between the handlers and the lab.
#[derive(Debug)]
pub struct Recorder {
    pub started: Instant,
    pub config: FlakyConfig,
    state: Mutex<RecorderState>,
}

#[derive(Debug, Default)]
struct RecorderState {
    arrivals: Vec<Arrival>,
    /// Per client id: the wall-clock moment before which it was asked not to come back.
    not_before: std::collections::HashMap<u64, SystemTime>,
}

impl Recorder {
    pub fn new(config: FlakyConfig) -> Arc<Recorder> {
        Arc::new(Recorder {
            started: Instant::now(),
            config,
            state: Mutex::default(),
        })
    }

    /// Everything seen so far.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.lock().arrivals.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RecorderState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn header_number(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.parse().ok()
}

/// The Retry-After the server sends `remaining` before it recovers: always a
/// whole number of seconds (the header cannot say less), rounded up so that
/// a client that obeys it never comes back before the recovery.
fn retry_after_value(form: RetryAfterForm, remaining: Duration) -> Option<(String, SystemTime)> {
    let seconds = remaining.as_secs() + u64::from(remaining.subsec_nanos() > 0);
    let seconds = seconds.max(1);
    let now = SystemTime::now();
    match form {
        RetryAfterForm::Absent => None,
        RetryAfterForm::Seconds => Some((seconds.to_string(), now + Duration::from_secs(seconds))),
        RetryAfterForm::HttpDate => {
            // An HTTP-date has whole seconds: name the first whole second at
            // or after the moment meant, so truncation cannot make it early.
            let target = now + Duration::from_secs(seconds);
            let since_epoch = target
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            let whole = since_epoch.as_secs() + u64::from(since_epoch.subsec_nanos() > 0);
            let named = SystemTime::UNIX_EPOCH + Duration::from_secs(whole);
            Some((httpdate::fmt_http_date(named), named))
        }
    }
}

/// `/item` (GET) and `/charge` (POST): fail during the outage, then 200.
async fn flaky(
    State(recorder): State<Arc<Recorder>>,
    method: Method,
    headers: HeaderMap,
    path: axum::http::Uri,
) -> Response {
    let at = recorder.started.elapsed();
    let client = header_number(&headers, "x-client");
    let failing = at < recorder.config.outage;
    let mut arrival = Arrival {
        at,
        path: path.path().to_string(),
        method,
        client,
        idempotency_key: headers
            .get("idempotency-key")
            .and_then(|value| value.to_str().ok())
            .map(String::from),
        status: if failing {
            recorder.config.failure_status.as_u16()
        } else {
            200
        },
        early: false,
    };
    let now = SystemTime::now();
    let mut state = recorder.lock();
    if let Some(id) = client
        && let Some(not_before) = state.not_before.get(&id)
    {
        arrival.early = now < *not_before;
    }
    if !failing {
        state.arrivals.push(arrival);
        return (StatusCode::OK, "ok").into_response();
    }
    let mut response = (recorder.config.failure_status, "try later").into_response();
    if let Some((value, not_before)) =
        retry_after_value(recorder.config.retry_after, recorder.config.outage - at)
    {
        if let Ok(header) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(RETRY_AFTER, header);
        }
        if let Some(id) = client {
            state.not_before.insert(id, not_before);
        }
    }
    state.arrivals.push(arrival);
    response
}

/// `/status/{code}`: always answers with that status.
async fn fixed_status(
    State(recorder): State<Arc<Recorder>>,
    method: Method,
    Path(code): Path<u16>,
) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
    recorder.lock().arrivals.push(Arrival {
        at: recorder.started.elapsed(),
        path: format!("/status/{code}"),
        method,
        client: None,
        idempotency_key: None,
        status: status.as_u16(),
        early: false,
    });
    (status, "fixed").into_response()
}

/// `/slow`: answers after `slow_for`, long after any sane per-attempt timeout.
async fn slow(State(recorder): State<Arc<Recorder>>, method: Method) -> Response {
    recorder.lock().arrivals.push(Arrival {
        at: recorder.started.elapsed(),
        path: "/slow".into(),
        method,
        client: None,
        idempotency_key: None,
        status: 200,
        early: false,
    });
    tokio::time::sleep(recorder.config.slow_for).await;
    (StatusCode::OK, "finally").into_response()
}

/// The app, without a socket (tests can call it directly; the lab serves it).
pub fn app(recorder: Arc<Recorder>) -> Router {
    Router::new()
        .route("/item", get(flaky))
        .route("/charge", any(flaky))
        .route("/status/{code}", any(fixed_status))
        .route("/slow", any(slow))
        .with_state(recorder)
}
