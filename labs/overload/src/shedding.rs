//! Part 2, load shedding: a server with a fixed capacity, offered from half
//! of it to three times it. A server that queues everything spends its
//! workers on requests whose clients have given up, so its goodput falls as
//! the load rises; a server that refuses what it cannot start (503, or 429
//! from a rate limit) keeps serving its capacity.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context, Result};
use axum::{
    BoxError, Router,
    error_handling::HandleErrorLayer,
    extract::State,
    http::{HeaderValue, StatusCode, header::RETRY_AFTER},
    response::IntoResponse,
    routing::get,
};
use lab_kit::{
    Output, Series,
    concurrently::run_all,
    server::{RunningServer, spawn_axum},
    stats::Latencies,
};
use serde::Serialize;
use tokio::{sync::Semaphore, time::Instant};
use tower::{ServiceBuilder, limit::GlobalConcurrencyLimitLayer};

use crate::{
    Config,
    arrivals::open_loop,
    dependency::{Dependency, DependencyConfig, RETRY_AFTER_S},
    in_production, on_lab_clock,
};

lab_kit::series! {
    /// What the server does with more work than its workers can take.
    pub enum Shedding in "shed" {
        /// Queues every request; the work goes on after its client left.
        Queue => "queue",
        /// Queues every request; hyper drops a request whose client left.
        QueueCancels => "queue-cancels",
        /// `tower::load_shed` over `concurrency_limit`: 503 when no worker is free.
        LoadShed => "load-shed",
        /// A token bucket at the server's capacity: 429 when it is empty.
        TokenBucket => "token-bucket",
    }
}

/// One server at one offered load, in production time.
#[derive(Debug, Clone, Serialize)]
pub struct ShedPoint {
    /// Offered load as a multiple of the server's capacity.
    pub offered_x: f64,
    pub offered_per_s: f64,
    /// Requests answered 200 before their client gave up, per second.
    pub goodput_per_s: f64,
    pub goodput_pct_of_capacity: f64,
    pub ok_p50_ms: f64,
    pub ok_p99_ms: f64,
    pub timed_out: u64,
    /// Answered 503 or 429 at once.
    pub refused: u64,
}

enum Server {
    Queueing(Dependency),
    Plain(RunningServer),
}

impl Server {
    fn url(&self) -> String {
        match self {
            Server::Queueing(dependency) => dependency.url(),
            Server::Plain(server) => server.url("/work"),
        }
    }
}

// ANCHOR: load_shed
/// Refuses at once when every worker is busy: the limit is not ready, and
/// `load_shed` turns "not ready" into an error that `HandleErrorLayer`
/// answers with 503 and `Retry-After`.
fn load_shedding_app(workers: usize, service: Duration) -> Router {
    let shed = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(|_: BoxError| async {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S))],
            )
        }))
        .load_shed()
        // Not `.concurrency_limit(workers)`: under `Router::layer` that is a
        // limit per connection (tests/overload/tower_limits.rs). The global layer
        // builds its semaphore once and shares it.
        .layer(GlobalConcurrencyLimitLayer::new(workers));
    Router::new()
        .route("/work", get(move || tokio::time::sleep(service)))
        .layer(shed)
}
// ANCHOR_END: load_shed

// ANCHOR: token_bucket
/// A token bucket: `rate_per_s` tokens a second, at most `burst` saved up.
struct TokenBucket {
    rate_per_s: f64,
    burst: f64,
    tokens: f64,
    refilled: Instant,
}

impl TokenBucket {
    fn try_take(&mut self) -> bool {
        let now = Instant::now();
        let earned = now.duration_since(self.refilled).as_secs_f64() * self.rate_per_s;
        self.tokens = (self.tokens + earned).min(self.burst);
        self.refilled = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

struct Limited {
    bucket: Mutex<TokenBucket>,
    workers: Semaphore,
    service: Duration,
}

async fn rate_limited(State(limited): State<Arc<Limited>>) -> impl IntoResponse {
    // A std Mutex: held for a few arithmetic operations, never across an await.
    let admitted = limited.bucket.lock().expect("no panic holds it").try_take();
    if !admitted {
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S))],
        )
            .into_response();
    }
    let Ok(_worker) = limited.workers.acquire().await else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    tokio::time::sleep(limited.service).await;
    StatusCode::OK.into_response()
}
// ANCHOR_END: token_bucket

async fn start(kind: Shedding, config: &Config) -> Result<Server> {
    let service = on_lab_clock(config.shedding_service_ms / 1000.0, config.time_scale);
    let workers = config.shedding_workers;
    let queueing = |work_outlives_caller| DependencyConfig {
        workers,
        service,
        slow_service: service,
        slow_from: Duration::ZERO,
        slow_until: Duration::ZERO,
        work_outlives_caller,
        queue_limit: None,
    };
    Ok(match kind {
        Shedding::Queue => {
            Server::Queueing(Dependency::start(queueing(true), Instant::now()).await?)
        }
        Shedding::QueueCancels => {
            Server::Queueing(Dependency::start(queueing(false), Instant::now()).await?)
        }
        Shedding::LoadShed => Server::Plain(spawn_axum(load_shedding_app(workers, service)).await?),
        Shedding::TokenBucket => {
            let capacity_per_s = workers as f64 / service.as_secs_f64();
            let limited = Limited {
                bucket: Mutex::new(TokenBucket {
                    rate_per_s: capacity_per_s,
                    burst: workers as f64,
                    tokens: workers as f64,
                    refilled: Instant::now(),
                }),
                workers: Semaphore::new(workers),
                service,
            };
            let app = Router::new()
                .route("/work", get(rate_limited))
                .with_state(Arc::new(limited));
            Server::Plain(spawn_axum(app).await?)
        }
    })
}

enum Answer {
    Ok(Duration),
    Refused,
    TimedOut,
}

/// One server at one load: a fresh server, so no backlog carries over.
async fn shed_point(kind: Shedding, offered_x: f64, config: Config) -> Result<ShedPoint> {
    let server = start(kind, &config).await.context("starting the server")?;
    let scale = config.time_scale;
    let capacity_per_s = config.shedding_capacity_per_s();
    let client = reqwest::Client::builder()
        .build()
        .context("building the client")?;
    let timeout = on_lab_clock(config.shedding_client_timeout_s, scale);
    let url = server.url();
    let answers = open_loop(
        offered_x * capacity_per_s * scale,
        Instant::now(),
        on_lab_clock(config.shedding_point_s, scale),
        config.seed,
        move |_, _| {
            let request = client.get(&url).timeout(timeout);
            async move {
                let started = Instant::now();
                match request.send().await {
                    Ok(response) if response.status() == StatusCode::OK => {
                        Answer::Ok(started.elapsed())
                    }
                    Ok(_) => Answer::Refused,
                    Err(_) => Answer::TimedOut,
                }
            }
        },
    )
    .await?;
    let mut ok = Latencies::default();
    let (mut refused, mut timed_out) = (0, 0);
    for answer in answers {
        match answer {
            Answer::Ok(elapsed) => ok.record(elapsed),
            Answer::Refused => refused += 1,
            Answer::TimedOut => timed_out += 1,
        }
    }
    let summary = in_production(ok.summary(), scale);
    let goodput_per_s = summary.count as f64 / config.shedding_point_s;
    Ok(ShedPoint {
        offered_x,
        offered_per_s: offered_x * capacity_per_s,
        goodput_per_s,
        goodput_pct_of_capacity: 100.0 * goodput_per_s / capacity_per_s,
        ok_p50_ms: summary.p50_ms,
        ok_p99_ms: summary.p99_ms,
        timed_out,
        refused,
    })
}

/// A server over the whole sweep, for the chapter's sentences.
#[derive(Debug, Clone, Serialize)]
pub struct ShedSummary {
    pub workers: usize,
    pub service_ms: f64,
    pub capacity_per_s: f64,
    pub lowest_load_x: f64,
    pub goodput_pct_at_lowest_load: f64,
    pub highest_load_x: f64,
    pub goodput_pct_at_highest_load: f64,
    pub ok_p99_ms_at_highest_load: f64,
}

/// The sweep: at each load, the four servers side by side; then a summary
/// of each server.
pub async fn run_shedding(config: &Config, out: &mut Output) -> Result<()> {
    let mut sweeps: Vec<(Shedding, Vec<ShedPoint>)> = Shedding::ALL
        .iter()
        .map(|kind| (*kind, Vec::new()))
        .collect();
    for &offered_x in &config.shedding_loads {
        let config = config.clone();
        let points = run_all(Shedding::ALL, Series::series, move |kind| {
            shed_point(kind, offered_x, config.clone())
        })
        .await
        .with_context(|| format!("at {offered_x}x capacity"))?;
        for ((kind, point), (_, sweep)) in points.into_iter().zip(&mut sweeps) {
            out.write_sample(&kind.series(), &point)?;
            sweep.push(point);
        }
    }
    for (kind, sweep) in sweeps {
        let (Some(lowest), Some(highest)) = (sweep.first(), sweep.last()) else {
            continue;
        };
        let summary = ShedSummary {
            workers: config.shedding_workers,
            service_ms: config.shedding_service_ms,
            capacity_per_s: config.shedding_capacity_per_s(),
            lowest_load_x: lowest.offered_x,
            goodput_pct_at_lowest_load: lowest.goodput_pct_of_capacity,
            highest_load_x: highest.offered_x,
            goodput_pct_at_highest_load: highest.goodput_pct_of_capacity,
            ok_p99_ms_at_highest_load: highest.ok_p99_ms,
        };
        out.write_summary(&kind.series(), &summary)?;
    }
    Ok(())
}
