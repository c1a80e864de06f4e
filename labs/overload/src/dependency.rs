//! A dependency with a capacity: a fixed number of workers, a FIFO queue in
//! front of them, and a service time that a slow spell stretches. Every part
//! of the lab calls one or more of these over real HTTP on 127.0.0.1.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Result;
use axum::{
    Router,
    extract::State,
    http::{HeaderValue, StatusCode, header::RETRY_AFTER},
    response::{IntoResponse, Response},
    routing::get,
};
use lab_kit::{
    gauge::Gauge,
    server::{RunningServer, spawn_axum},
};
use tokio::{sync::Semaphore, time::Instant};

/// What one dependency can do, and when it turns slow.
#[derive(Debug, Clone)]
pub struct DependencyConfig {
    /// Requests served at once; the rest wait in line for a worker.
    pub workers: usize,
    /// How long a request takes once a worker has it.
    pub service: Duration,
    /// From `slow_from` to `slow_until` after `epoch`, a request that gets a
    /// worker takes `slow_service` instead: a lock, a failover, a hang.
    pub slow_service: Duration,
    pub slow_from: Duration,
    pub slow_until: Duration,
    /// Whether the work goes on after its caller has left. A database query
    /// or a job handed to a worker pool does; an axum handler that hyper
    /// drops when the connection closes does not (the cancellation chapter).
    pub work_outlives_caller: bool,
    /// With `Some(n)`: when every worker is busy and `n` requests already
    /// wait, answer 503 with `Retry-After` at once instead of queueing.
    pub queue_limit: Option<usize>,
}

/// The `Retry-After` a shedding server sends, in seconds.
pub const RETRY_AFTER_S: u64 = 1;

/// What a dependency counted; every gauge is shared with the running server.
#[derive(Debug, Clone, Default)]
pub struct DependencyStats {
    /// Requests it holds: waiting for a worker or being served.
    pub held: Gauge,
    /// Requests waiting for a worker.
    pub waiting: Gauge,
    /// Requests served to the end (whether or not anyone still waited).
    pub served: Arc<AtomicU64>,
    /// Requests that arrived, and those that arrived during the slow spell.
    pub arrived: Arc<AtomicU64>,
    pub arrived_in_spell: Arc<AtomicU64>,
}

struct DependencyState {
    config: DependencyConfig,
    epoch: Instant,
    workers: Arc<Semaphore>,
    stats: DependencyStats,
}

impl DependencyState {
    fn in_spell(&self) -> bool {
        let since_epoch = self.epoch.elapsed();
        since_epoch >= self.config.slow_from && since_epoch < self.config.slow_until
    }
}

/// A running dependency; dropping it stops the server and its queued work.
pub struct Dependency {
    server: RunningServer,
    state: Arc<DependencyState>,
}

impl Dependency {
    /// Serves `GET /work` on 127.0.0.1, port 0; the slow spell is timed from
    /// `epoch`.
    pub async fn start(config: DependencyConfig, epoch: Instant) -> Result<Dependency> {
        let state = Arc::new(DependencyState {
            workers: Arc::new(Semaphore::new(config.workers)),
            config,
            epoch,
            stats: DependencyStats::default(),
        });
        let app = Router::new()
            .route("/work", get(work))
            .with_state(Arc::clone(&state));
        let server = spawn_axum(app).await?;
        Ok(Dependency { server, state })
    }

    pub fn url(&self) -> String {
        self.server.url("/work")
    }

    pub fn stats(&self) -> &DependencyStats {
        &self.state.stats
    }

    /// Connections the dependency accepted so far.
    pub fn connections(&self) -> u64 {
        self.server.stats.accepted()
    }
}

impl Drop for Dependency {
    fn drop(&mut self) {
        // Work still queued gives up: its `acquire` fails on a closed
        // semaphore. Work being served finishes its sleep and ends.
        self.state.workers.close();
    }
}

// ANCHOR: dependency
async fn work(State(state): State<Arc<DependencyState>>) -> Response {
    let stats = &state.stats;
    stats.arrived.fetch_add(1, Ordering::Relaxed);
    if state.in_spell() {
        stats.arrived_in_spell.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(limit) = state.config.queue_limit
        && state.workers.available_permits() == 0
        && stats.waiting.now() >= limit as u64
    {
        let retry_after = HeaderValue::from(RETRY_AFTER_S);
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(RETRY_AFTER, retry_after)],
        )
            .into_response();
    }
    let job = serve_one(Arc::clone(&state));
    let served = if state.config.work_outlives_caller {
        // Handed to a task of its own: if hyper drops this handler because
        // the caller left, the job still waits for a worker and runs.
        tokio::spawn(job).await.unwrap_or(false)
    } else {
        job.await
    };
    if served {
        StatusCode::OK.into_response()
    } else {
        StatusCode::SERVICE_UNAVAILABLE.into_response()
    }
}

/// Waits in line for a worker, then works; `false` if the dependency stopped.
async fn serve_one(state: Arc<DependencyState>) -> bool {
    let _held = state.stats.held.enter();
    let waiting = state.stats.waiting.enter();
    let Ok(_worker) = Arc::clone(&state.workers).acquire_owned().await else {
        return false;
    };
    drop(waiting);
    let config = &state.config;
    let slow = state.in_spell();
    tokio::time::sleep(if slow {
        config.slow_service
    } else {
        config.service
    })
    .await;
    state.stats.served.fetch_add(1, Ordering::Relaxed);
    true
}
// ANCHOR_END: dependency
