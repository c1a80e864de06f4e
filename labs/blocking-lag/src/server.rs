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
    net::{Ipv4Addr, SocketAddr},
    sync::{Arc, Mutex},
    thread,
    time::Duration,
};

use anyhow::{Context, Result, bail};
use axum::{
    Router,
    routing::{get, post},
};
use tokio::sync::{oneshot, watch};
use tokio_metrics::TaskMonitor;

use crate::handlers::{
    AppState, LagSample, Offload, Span, health, job_status, lag_probe, login, report, start_job,
    start_job_worker,
};

/// Which runtime the server runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// One thread runs every task, the accept loop, timers and I/O: the
    /// flavour of `#[tokio::test]` and `#[tokio::main(flavor = "current_thread")]`.
    CurrentThread,
    /// Work-stealing workers (tokio's default is one per core).
    MultiThread { workers: usize },
}

impl Flavour {
    /// A runtime of this flavour, with timers and I/O enabled.
    pub fn runtime(self) -> Result<tokio::runtime::Runtime> {
        // ANCHOR: runtimes
        match self {
            Flavour::CurrentThread => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build(),
            Flavour::MultiThread { workers } => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .thread_name("server-worker")
                .enable_all()
                .build(),
        }
        .context("building the server runtime")
        // ANCHOR_END: runtimes
    }
}

/// Everything the server was asked to do, and what it remembers.
pub struct ServerSettings {
    pub flavour: Flavour,
    pub offload: Offload,
    pub rows: usize,
    pub chunk_rows: usize,
    pub rayon_threads: usize,
    pub lag_interval: Duration,
    /// A poll longer than this counts as slow in the per-route task monitors.
    pub slow_poll: Duration,
}

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
pub struct LagServer {
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

impl LagServer {
    /// Starts the server's runtime on a thread of its own and waits for its port.
    pub async fn start(settings: ServerSettings) -> Result<LagServer> {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let rayon = match settings.offload {
            Offload::Rayon => Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(settings.rayon_threads.max(1))
                    .thread_name(|index| format!("report-rayon-{index}"))
                    .build()
                    .context("building the rayon pool")?,
            ),
            _ => None,
        };
        let (jobs, job_worker) = match settings.offload {
            Offload::BackgroundJob => {
                let (queue, worker) = start_job_worker(settings.rows, Arc::clone(&spans))?;
                (Some(queue), Some(worker))
            }
            _ => (None, None),
        };
        let slow = settings.slow_poll;
        let app = Arc::new(AppState {
            rows: settings.rows,
            chunk_rows: settings.chunk_rows,
            offload: settings.offload,
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
        let mut server = LagServer {
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

impl Drop for LagServer {
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
    let runtime = flavour.runtime()?;
    let outcome = runtime.block_on(async move {
        let listener = lab_kit::net::bind_loopback().await?;
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
