//! The server's routes: /report (its CPU work done where the server's
//! `Offload` says), the background-job routes, /health, /login, and the lag
//! probe that runs beside them on the same runtime.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use axum::{
    extract::{Path, State},
    http::{StatusCode, header},
    response::IntoResponse,
};
use lab_kit::clock::monotonic_ms;
use tokio::sync::oneshot;
use tokio_metrics::TaskMonitor;

use crate::report::{Built, build_report, build_report_chunked};

/// How /report does its CPU work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offload {
    /// In the handler, on the runtime's worker: the bug.
    Inline,
    /// On tokio's blocking pool.
    SpawnBlocking,
    /// On a small rayon pool, the answer coming back through a oneshot channel.
    Rayon,
    /// Out of the request: a job queue and its worker; the client polls a URL.
    BackgroundJob,
    /// On the worker, but yielding every `chunk_rows` rows.
    Chunked,
}

/// When one report's computation ran, in monotonic milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub start_ms: f64,
    pub end_ms: f64,
}

/// One wake-up of the lag probe: when it was due and how late it woke.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LagSample {
    pub due_ms: f64,
    pub late_ms: f64,
}

/// A finished or running background job.
#[derive(Debug, Clone, Copy)]
pub(crate) enum JobState {
    Queued,
    Done(Built),
}

pub(crate) struct JobQueue {
    /// `None` once the server stopped.
    pub(crate) sender: Mutex<Option<mpsc::SyncSender<u64>>>,
    pub(crate) states: Arc<Mutex<HashMap<u64, JobState>>>,
    pub(crate) next_id: AtomicU64,
}

pub(crate) struct AppState {
    pub(crate) rows: usize,
    pub(crate) chunk_rows: usize,
    pub(crate) offload: Offload,
    pub(crate) spans: Arc<Mutex<Vec<Span>>>,
    pub(crate) rayon: Option<rayon::ThreadPool>,
    pub(crate) jobs: Option<JobQueue>,
    pub(crate) report_monitor: TaskMonitor,
    pub(crate) health_monitor: TaskMonitor,
}

/// The report, with its start and end written down where it actually ran.
fn timed_report(rows: usize, spans: &Mutex<Vec<Span>>) -> Built {
    let start_ms = monotonic_ms();
    let built = build_report(rows);
    record_span(spans, start_ms);
    built
}

/// Writes down one report that started at `start_ms` and ends now.
fn record_span(spans: &Mutex<Vec<Span>>, start_ms: f64) {
    let end_ms = monotonic_ms();
    spans
        .lock()
        .expect("the span list is never poisoned")
        .push(Span { start_ms, end_ms });
}

// ANCHOR: handlers
/// GET /report: the same report, computed where the server's offload says.
pub(crate) async fn report(State(app): State<Arc<AppState>>) -> Result<String, StatusCode> {
    let rows = app.rows;
    let spans = Arc::clone(&app.spans);
    let monitor = app.report_monitor.clone();
    let work = async move {
        let built = match app.offload {
            // The bug: CPU work inside the handler future. The worker that
            // polls this future can do nothing else until it returns.
            Offload::Inline => timed_report(rows, &spans),
            // Fix 1: tokio's blocking pool (up to 512 threads by default,
            // an unbounded queue in front of them). The worker only awaits
            // the JoinHandle. Dropping that handle does not stop the work.
            Offload::SpawnBlocking => {
                tokio::task::spawn_blocking(move || timed_report(rows, &spans))
                    .await
                    .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?
            }
            // Fix 2: a CPU pool we size ourselves, answering through a
            // oneshot. The pool is a bulkhead: reports queue for its threads
            // instead of taking every core.
            Offload::Rayon => {
                let (answer, answered) = oneshot::channel();
                let pool = app
                    .rayon
                    .as_ref()
                    .ok_or(StatusCode::INTERNAL_SERVER_ERROR)?;
                pool.spawn(move || {
                    // The receiver may be gone if the client left; nothing to do then.
                    let _ = answer.send(timed_report(rows, &spans));
                });
                answered
                    .await
                    .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?
            }
            // Fix 3: stay on the worker but give it back every chunk_rows rows.
            Offload::Chunked => {
                let start_ms = monotonic_ms();
                let built = build_report_chunked(rows, app.chunk_rows).await;
                record_span(&spans, start_ms);
                built
            }
            Offload::BackgroundJob => return Err(StatusCode::NOT_FOUND),
        };
        Ok(format!("{} bytes\n", built.bytes))
    };
    // tokio-metrics: every poll of this future is timed; a poll longer than
    // the slow-poll threshold is counted against the /report route.
    monitor.instrument(work).await
}

/// POST /reports: fix 4, the report leaves the request. The handler only
/// queues a job and answers 202 with the URL to poll.
pub(crate) async fn start_job(
    State(app): State<Arc<AppState>>,
) -> Result<impl IntoResponse, StatusCode> {
    let jobs = app.jobs.as_ref().ok_or(StatusCode::NOT_FOUND)?;
    let id = jobs.next_id.fetch_add(1, Ordering::SeqCst);
    jobs.states
        .lock()
        .expect("the job table is never poisoned")
        .insert(id, JobState::Queued);
    // A bounded queue: when it is full the server says so instead of piling up work.
    let queued = match jobs.sender.lock().expect("never poisoned").as_ref() {
        Some(sender) => sender.try_send(id).is_ok(),
        None => false,
    };
    if !queued {
        return Err(StatusCode::SERVICE_UNAVAILABLE);
    }
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, format!("/reports/{id}"))],
    ))
}

/// GET /reports/{id}: 200 with the size once done, 202 while queued or running.
pub(crate) async fn job_status(
    State(app): State<Arc<AppState>>,
    Path(id): Path<u64>,
) -> Result<(StatusCode, String), StatusCode> {
    let jobs = app.jobs.as_ref().ok_or(StatusCode::NOT_FOUND)?;
    let states = jobs.states.lock().expect("the job table is never poisoned");
    match states.get(&id) {
        Some(JobState::Done(built)) => Ok((StatusCode::OK, format!("{} bytes\n", built.bytes))),
        Some(JobState::Queued) => Ok((StatusCode::ACCEPTED, "running\n".into())),
        None => Err(StatusCode::NOT_FOUND),
    }
}
// ANCHOR_END: handlers

pub(crate) async fn health(State(app): State<Arc<AppState>>) -> &'static str {
    app.health_monitor.instrument(async { "ok\n" }).await
}

/// A cheap stand-in for a login: a few microseconds of work.
pub(crate) async fn login() -> String {
    let token = (0..64u64).fold(0x9e37_79b9_7f4a_7c15_u64, |acc, byte| {
        acc.rotate_left(5) ^ byte
    });
    format!("token {token:016x}\n")
}

// ANCHOR: lag_probe
/// The lag probe: a task that asks to be woken every `interval` and writes
/// down how late it was. It runs on the server's own runtime, so it is late
/// exactly when that runtime cannot poll it: a timer that fired but whose
/// task could not run. Node's `monitorEventLoopDelay` is the same idea.
pub(crate) async fn lag_probe(interval: Duration, samples: Arc<Mutex<Vec<LagSample>>>) {
    // Bounded: the runtime is dropped when the server stops, and this at most
    // ten minutes of samples otherwise.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(600) {
        let planned = Instant::now() + interval;
        tokio::time::sleep_until(planned.into()).await;
        let late = Instant::now().saturating_duration_since(planned);
        samples
            .lock()
            .expect("the lag list is never poisoned")
            .push(LagSample {
                // Placed at the moment the tick was due, like a probe is
                // placed at the moment it was sent: a stall then shows at
                // the same x in both measurements.
                due_ms: monotonic_ms() - late.as_secs_f64() * 1000.0,
                late_ms: late.as_secs_f64() * 1000.0,
            });
    }
}
// ANCHOR_END: lag_probe

/// The background-job worker: one thread taking job ids from a bounded queue.
pub(crate) fn start_job_worker(
    rows: usize,
    spans: Arc<Mutex<Vec<Span>>>,
) -> Result<(JobQueue, thread::JoinHandle<()>)> {
    let (sender, receiver) = mpsc::sync_channel::<u64>(16);
    let states: Arc<Mutex<HashMap<u64, JobState>>> = Arc::default();
    let worker_states = Arc::clone(&states);
    let worker = thread::Builder::new()
        .name("report-job-worker".into())
        .spawn(move || {
            // Ends when every sender is gone (the server stopped).
            while let Ok(id) = receiver.recv() {
                let built = timed_report(rows, &spans);
                worker_states
                    .lock()
                    .expect("the job table is never poisoned")
                    .insert(id, JobState::Done(built));
            }
        })
        .context("starting the job worker")?;
    Ok((
        JobQueue {
            sender: Mutex::new(Some(sender)),
            states,
            next_id: AtomicU64::new(1),
        },
        worker,
    ))
}
