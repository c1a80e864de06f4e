//! Counting: a client abort is not a server error. One server, one batch of
//! requests, three access logs stacked on the same router so they see the
//! same requests: tower-http's `TraceLayer` (its `on_response` callback), a
//! log that counts a request that ended without a response as a 500, and one
//! that records 499, as nginx does, for a request whose client left first.
//!
//! Some requests are slow and their client gives up (reqwest's per-request
//! timeout drops the request: hyper sees the connection close and drops the
//! handler's future, and every layer's future with it); a few fail for real
//! (the handler answers 500).

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context, Result};
use axum::{
    Router,
    extract::{Request, State},
    http::StatusCode,
    middleware::{self, Next},
    response::Response,
    routing::get,
};
use lab_kit::server::spawn_axum;
use serde::Serialize;
use tokio::task::JoinSet;
use tower_http::trace::TraceLayer;

use crate::Config;

lab_kit::series! {
    /// The access logs part 6 compares.
    pub enum AccessLog in "count" {
        /// `TraceLayer::on_response`: called when the inner service answers.
        TraceLayer => "trace-layer",
        /// A drop guard that writes 500 when no response was produced.
        AbortAs500 => "abort-as-500",
        /// A drop guard that writes 499 when no response was produced.
        AbortAs499 => "abort-as-499",
    }
}

/// The statuses each log wrote, one entry a request it saw.
#[derive(Default)]
struct Logs {
    trace_layer: Mutex<Vec<u16>>,
    abort_as_500: Mutex<Vec<u16>>,
    abort_as_499: Mutex<Vec<u16>>,
}

impl Logs {
    fn of(&self, log: AccessLog) -> &Mutex<Vec<u16>> {
        match log {
            AccessLog::TraceLayer => &self.trace_layer,
            AccessLog::AbortAs500 => &self.abort_as_500,
            AccessLog::AbortAs499 => &self.abort_as_499,
        }
    }

    fn write(&self, log: AccessLog, status: u16) {
        self.of(log)
            .lock()
            .expect("the log is not poisoned")
            .push(status);
    }

    fn read(&self, log: AccessLog) -> Vec<u16> {
        self.of(log)
            .lock()
            .expect("the log is not poisoned")
            .clone()
    }
}

// ANCHOR: status_499
/// nginx's "client closed request": not a status any client ever receives,
/// only what the log says happened.
pub const CLIENT_CLOSED_REQUEST: u16 = 499;

/// Writes the request's line when dropped: the response's status if the
/// handler produced one, `if_no_response` if its future was dropped first
/// (the client left, so hyper dropped the whole service future).
struct LogLine {
    logs: Arc<Logs>,
    log: AccessLog,
    status: Option<u16>,
    if_no_response: u16,
}

impl Drop for LogLine {
    fn drop(&mut self) {
        let status = self.status.unwrap_or(self.if_no_response);
        self.logs.write(self.log, status);
    }
}

async fn log_with_499(State(logs): State<Arc<Logs>>, request: Request, next: Next) -> Response {
    let mut line = LogLine {
        logs,
        log: AccessLog::AbortAs499,
        status: None,
        if_no_response: CLIENT_CLOSED_REQUEST,
    };
    let response = next.run(request).await;
    line.status = Some(response.status().as_u16());
    response
}
// ANCHOR_END: status_499

async fn log_with_500(State(logs): State<Arc<Logs>>, request: Request, next: Next) -> Response {
    let mut line = LogLine {
        logs,
        log: AccessLog::AbortAs500,
        status: None,
        if_no_response: 500,
    };
    let response = next.run(request).await;
    line.status = Some(response.status().as_u16());
    response
}

#[derive(Clone)]
struct Work {
    slow: Duration,
    fast: Duration,
}

/// `/slow` outlasts its client's patience; `/fail` is a real server error.
fn app(work: Work, logs: Arc<Logs>) -> Router {
    let slow = work.slow;
    let fast = work.fast;
    let trace_logs = Arc::clone(&logs);
    Router::new()
        .route(
            "/slow",
            get(move || async move {
                tokio::time::sleep(slow).await;
                "slow"
            }),
        )
        .route(
            "/fast",
            get(move || async move {
                tokio::time::sleep(fast).await;
                "fast"
            }),
        )
        .route(
            "/fail",
            get(move || async move {
                tokio::time::sleep(fast).await;
                (StatusCode::INTERNAL_SERVER_ERROR, "failed")
            }),
        )
        .layer(middleware::from_fn_with_state(
            Arc::clone(&logs),
            log_with_499,
        ))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&logs),
            log_with_500,
        ))
        .layer(TraceLayer::new_for_http().on_response(
            move |response: &Response, _latency: Duration, _span: &tracing::Span| {
                trace_logs.write(AccessLog::TraceLayer, response.status().as_u16());
            },
        ))
}

/// What one access log recorded, beside what the clients saw.
#[derive(Debug, Clone, Serialize)]
pub struct AccessLogCount {
    pub log: &'static str,
    pub requests_sent: u64,
    /// Requests whose client gave up (its timeout fired).
    pub client_aborts: u64,
    /// Requests the clients received a 500 for.
    pub server_errors_seen_by_clients: u64,
    pub lines: u64,
    pub lines_2xx: u64,
    pub lines_499: u64,
    pub lines_5xx: u64,
    /// 5xx lines over lines, the number an alert would fire on.
    pub error_rate_pct: f64,
}

/// Sends the batch, waits for the logs to settle, counts: one count per
/// log, in the order of [`AccessLog::ALL`].
pub async fn run_counting(config: &Config) -> Result<Vec<AccessLogCount>> {
    let logs = Arc::new(Logs::default());
    let work = Work {
        slow: config.lab(config.count_slow_s),
        fast: config.lab(config.count_fast_s),
    };
    let server = spawn_axum(app(work, Arc::clone(&logs))).await?;
    let client = reqwest::Client::new();
    let mut requests = JoinSet::new();
    for index in 1..=config.count_requests {
        let path = if index % config.count_slow_every == 0 {
            "/slow"
        } else if index % config.count_fail_every == 0 {
            "/fail"
        } else {
            "/fast"
        };
        let request = client
            .get(server.url(path))
            .timeout(config.lab(config.count_client_timeout_s));
        requests.spawn(async move { request.send().await.map(|response| response.status()) });
    }
    let (mut aborts, mut errors_seen) = (0, 0);
    while let Some(joined) = requests.join_next().await {
        match joined.context("a client task panicked")? {
            Ok(status) if status == StatusCode::INTERNAL_SERVER_ERROR => errors_seen += 1,
            Ok(_) => {}
            Err(error) if error.is_timeout() => aborts += 1,
            Err(error) => return Err(error).context("a request failed other than by its timeout"),
        }
    }
    // The aborted handlers are dropped when hyper reads the connection's
    // end; give that a bound, then count what each log holds.
    let sent = config.count_requests;
    let settle_until = tokio::time::Instant::now() + config.lab(config.count_slow_s);
    while logs.read(AccessLog::AbortAs499).len() < sent as usize
        && tokio::time::Instant::now() < settle_until
    {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.stop(Duration::from_millis(200)).await?;
    Ok(AccessLog::ALL
        .into_iter()
        .map(|log| {
            let lines = logs.read(log);
            let count =
                |keep: fn(u16) -> bool| lines.iter().filter(|status| keep(**status)).count() as u64;
            let lines_5xx = count(|status| status >= 500);
            AccessLogCount {
                log: log.name(),
                requests_sent: sent,
                client_aborts: aborts,
                server_errors_seen_by_clients: errors_seen,
                lines: lines.len() as u64,
                lines_2xx: count(|status| (200..300).contains(&status)),
                lines_499: count(|status| status == CLIENT_CLOSED_REQUEST),
                lines_5xx,
                error_rate_pct: lines_5xx as f64 * 100.0 / (lines.len().max(1)) as f64,
            }
        })
        .collect())
}
