//! The server under test: /report (done one of five ways), /health, /login,
//! and a lag probe inside it, each variant on a tokio runtime of its own.
//!
//! Why a runtime of its own, on its own thread, inside the lab's process: a
//! tokio runtime is a set of threads, not a process. The server's runtime
//! (current_thread or multi-thread with two workers) shares no thread with
//! the lab's own runtime, so when a report blocks the server's workers the
//! lab can still send requests and keep time. The CPU is shared, as it would
//! be with a child process; the prober that measures /health is a separate
//! process anyway (see `prober`).

use std::{
    collections::HashMap,
    net::{Ipv4Addr, SocketAddr},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use axum::{
    Router,
    extract::{Path, State},
    http::{StatusCode, header},
    response::IntoResponse,
    routing::{get, post},
};
use lab_kit::clock::monotonic_ms;
use tokio::sync::{oneshot, watch};
use tokio_metrics::TaskMonitor;

use crate::report::{Built, build_report, build_report_chunked};

/// Which runtime the server runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// One thread runs every task, the accept loop, timers and I/O: the
    /// flavour of `#[tokio::test]` and `#[tokio::main(flavor = "current_thread")]`.
    CurrentThread,
    /// Work-stealing workers (tokio's default is one per core).
    MultiThread { workers: usize },
}

/// How /report does its CPU work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
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

/// Everything the server was asked to do, and what it remembers.
pub struct ServerSettings {
    pub flavour: Flavour,
    pub strategy: Strategy,
    pub rows: usize,
    pub chunk_rows: usize,
    pub rayon_threads: usize,
    pub lag_interval: Duration,
    /// A poll longer than this counts as slow in the per-route task monitors.
    pub slow_poll: Duration,
}

/// A finished or running background job.
#[derive(Debug, Clone, Copy)]
enum JobState {
    Queued,
    Done(Built),
}

struct JobQueue {
    /// `None` once the server stopped.
    sender: Mutex<Option<mpsc::SyncSender<u64>>>,
    states: Arc<Mutex<HashMap<u64, JobState>>>,
    next_id: AtomicU64,
}

struct AppState {
    rows: usize,
    chunk_rows: usize,
    strategy: Strategy,
    spans: Arc<Mutex<Vec<Span>>>,
    rayon: Option<rayon::ThreadPool>,
    jobs: Option<JobQueue>,
    report_monitor: TaskMonitor,
    health_monitor: TaskMonitor,
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
/// GET /report: the same report, computed where the strategy says.
async fn report(State(app): State<Arc<AppState>>) -> Result<String, StatusCode> {
    let rows = app.rows;
    let spans = Arc::clone(&app.spans);
    let monitor = app.report_monitor.clone();
    let work = async move {
        let built = match app.strategy {
            // The bug: CPU work inside the handler future. The worker that
            // polls this future can do nothing else until it returns.
            Strategy::Inline => timed_report(rows, &spans),
            // Fix 1: tokio's blocking pool (up to 512 threads by default,
            // an unbounded queue in front of them). The worker only awaits
            // the JoinHandle. Dropping that handle does not stop the work.
            Strategy::SpawnBlocking => {
                tokio::task::spawn_blocking(move || timed_report(rows, &spans))
                    .await
                    .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?
            }
            // Fix 2: a CPU pool we size ourselves, answering through a
            // oneshot. The pool is a bulkhead: reports queue for its threads
            // instead of taking every core.
            Strategy::Rayon => {
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
            Strategy::Chunked => {
                let start_ms = monotonic_ms();
                let built = build_report_chunked(rows, app.chunk_rows).await;
                record_span(&spans, start_ms);
                built
            }
            Strategy::BackgroundJob => return Err(StatusCode::NOT_FOUND),
        };
        Ok(format!("{} bytes\n", built.bytes))
    };
    // tokio-metrics: every poll of this future is timed; a poll longer than
    // the slow-poll threshold is counted against the /report route.
    monitor.instrument(work).await
}

/// POST /reports: fix 4, the report leaves the request. The handler only
/// queues a job and answers 202 with the URL to poll.
async fn start_job(State(app): State<Arc<AppState>>) -> Result<impl IntoResponse, StatusCode> {
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
async fn job_status(
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

async fn health(State(app): State<Arc<AppState>>) -> &'static str {
    app.health_monitor.instrument(async { "ok\n" }).await
}

/// A cheap stand-in for a login: a few microseconds of work.
async fn login() -> String {
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
async fn lag_probe(interval: Duration, samples: Arc<Mutex<Vec<LagSample>>>) {
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

/// What the route monitors saw, for the culprit table.
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteMetrics {
    pub polls: u64,
    pub slow_polls: u64,
    pub slow_poll_ms: f64,
    pub mean_poll_ms: f64,
}

fn route_metrics(monitor: &TaskMonitor) -> RouteMetrics {
    let metrics = monitor.cumulative();
    RouteMetrics {
        polls: metrics.total_poll_count,
        slow_polls: metrics.total_slow_poll_count,
        slow_poll_ms: metrics.total_slow_poll_duration.as_secs_f64() * 1000.0,
        mean_poll_ms: metrics.mean_poll_duration().as_secs_f64() * 1000.0,
    }
}

/// A server running on its own runtime thread.
pub struct RunningServer {
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    thread: Option<thread::JoinHandle<Result<()>>>,
    app: Arc<AppState>,
    lag: Arc<Mutex<Vec<LagSample>>>,
    job_worker: Option<thread::JoinHandle<()>>,
}

/// What a stopped server hands back.
pub struct ServerRecord {
    pub spans: Vec<Span>,
    pub lag: Vec<LagSample>,
    pub report_route: RouteMetrics,
    pub health_route: RouteMetrics,
}

impl RunningServer {
    /// Starts the server's runtime on a thread of its own and waits for its port.
    pub async fn start(settings: ServerSettings) -> Result<RunningServer> {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let rayon = match settings.strategy {
            Strategy::Rayon => Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(settings.rayon_threads.max(1))
                    .thread_name(|index| format!("report-rayon-{index}"))
                    .build()
                    .context("building the rayon pool")?,
            ),
            _ => None,
        };
        let (jobs, job_worker) = match settings.strategy {
            Strategy::BackgroundJob => {
                let (queue, worker) = start_job_worker(settings.rows, Arc::clone(&spans))?;
                (Some(queue), Some(worker))
            }
            _ => (None, None),
        };
        let slow = settings.slow_poll;
        let app = Arc::new(AppState {
            rows: settings.rows,
            chunk_rows: settings.chunk_rows,
            strategy: settings.strategy,
            spans,
            rayon,
            jobs,
            report_monitor: TaskMonitor::with_slow_poll_threshold(slow),
            health_monitor: TaskMonitor::with_slow_poll_threshold(slow),
        });
        let router = Router::new()
            .route("/health", get(health))
            .route("/login", get(login))
            .route("/report", get(report))
            .route("/reports", post(start_job))
            .route("/reports/{id}", get(job_status))
            .with_state(Arc::clone(&app));
        let lag = Arc::new(Mutex::new(Vec::new()));
        let (stop, stop_seen) = watch::channel(false);
        let (addr_sender, addr_receiver) = oneshot::channel();
        let flavour = settings.flavour;
        let lag_interval = settings.lag_interval;
        let lag_samples = Arc::clone(&lag);
        let thread = thread::Builder::new()
            .name("server-runtime".into())
            .spawn(move || {
                serve_on_own_runtime(
                    flavour,
                    router,
                    lag_interval,
                    lag_samples,
                    addr_sender,
                    stop_seen,
                )
            })
            .context("starting the server thread")?;
        let mut server = RunningServer {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            stop,
            thread: Some(thread),
            app,
            lag,
            job_worker,
        };
        match tokio::time::timeout(Duration::from_secs(5), addr_receiver).await {
            Ok(Ok(addr)) => server.addr = addr,
            _ => {
                let failure = server.join().await.err();
                match failure {
                    Some(error) => return Err(error.context("the server did not start")),
                    None => bail!("the server did not report its address within 5 s"),
                }
            }
        }
        Ok(server)
    }

    /// Stops the server (bounded) and returns what it recorded.
    pub async fn stop(mut self) -> Result<ServerRecord> {
        self.join().await?;
        if let Some(worker) = self.job_worker.take() {
            // Dropping the queue's only sender ends the worker's loop once
            // its current job (if any) is done.
            if let Some(jobs) = &self.app.jobs {
                jobs.sender.lock().expect("never poisoned").take();
            }
            tokio::task::spawn_blocking(move || worker.join())
                .await
                .context("joining the job worker")?
                .map_err(|_| anyhow::anyhow!("the job worker panicked"))?;
        }
        Ok(self.record_of(&self.app))
    }

    fn record_of(&self, app: &AppState) -> ServerRecord {
        ServerRecord {
            spans: app.spans.lock().expect("never poisoned").clone(),
            lag: self.lag.lock().expect("never poisoned").clone(),
            report_route: route_metrics(&app.report_monitor),
            health_route: route_metrics(&app.health_monitor),
        }
    }

    async fn join(&mut self) -> Result<()> {
        let _ = self.stop.send(true);
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || thread.join())
            .await
            .context("joining the server thread")?
            .map_err(|_| anyhow::anyhow!("the server thread panicked"))?
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        // The runtime thread sees this, stops serving within its grace and
        // exits on its own; nothing here blocks.
        let _ = self.stop.send(true);
    }
}

/// The body of the server thread: build the runtime, serve until told to
/// stop, give connections a short grace, then drop every task.
fn serve_on_own_runtime(
    flavour: Flavour,
    router: Router,
    lag_interval: Duration,
    lag: Arc<Mutex<Vec<LagSample>>>,
    addr_sender: oneshot::Sender<SocketAddr>,
    mut stop_seen: watch::Receiver<bool>,
) -> Result<()> {
    // ANCHOR: runtimes
    let runtime = match flavour {
        Flavour::CurrentThread => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Flavour::MultiThread { workers } => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("server-worker")
            .enable_all()
            .build(),
    }
    .context("building the server runtime")?;
    // ANCHOR_END: runtimes
    let outcome = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .context("binding 127.0.0.1:0")?;
        let addr = listener.local_addr().context("reading the bound address")?;
        tokio::spawn(lag_probe(lag_interval, lag));
        let _ = addr_sender.send(addr);
        let mut graceful = stop_seen.clone();
        let serve = axum::serve(listener, router).with_graceful_shutdown(async move {
            let _ = graceful.wait_for(|stop| *stop).await;
        });
        let grace_over = async move {
            let _ = stop_seen.wait_for(|stop| *stop).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        tokio::select! {
            served = serve => served.context("serving"),
            () = grace_over => Ok(()),
        }
    });
    // Whatever is still running (a report nobody waits for) is dropped here;
    // blocking threads get a moment, then are detached.
    runtime.shutdown_timeout(Duration::from_millis(500));
    outcome
}

/// The background-job worker: one thread taking job ids from a bounded queue.
fn start_job_worker(
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
