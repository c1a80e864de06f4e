//! The two Rust services the lab points the doctor at, as one would write
//! them: `stock`, a plain `axum::serve` service; and `hardened`, the same
//! routes with what the book's chapters add (a header read timeout above
//! the balancer's idle timeout, a body timeout and a handler deadline, a
//! write timeout, heavy work off the runtime, a bounded queue that sheds
//! with Retry-After, and a drain on SIGTERM). Both run on two worker
//! threads, so that a burst of heavy requests blocks the stock one on any
//! machine, however many cores it has.
//!
//! Production durations are divided by `scale`, as in the server-timeouts
//! lab; CPU work and the pool's service time are real.

use std::{
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderValue, StatusCode, header::RETRY_AFTER},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use hyper_util::{rt::TokioIo, server::graceful::GracefulShutdown, service::TowerToHyperService};
use lab_kit::stream::{HookedStream, StreamHook};
use lab_kit::{flags::Flags, gauge::Gauge, server::http1_builder};
use lab_server_timeouts::HARDENED;
use tokio::{
    net::{TcpListener, TcpStream},
    sync::Semaphore,
    time::Sleep,
};
use tower_http::timeout::{RequestBodyTimeoutLayer, TimeoutLayer};

lab_kit::series! {
    /// The services the lab runs.
    pub enum Service {
        /// `axum::serve(listener, app)`: what most axum services run.
        Stock => "stock-axum",
        /// The same routes, hardened the way the book's chapters show.
        Hardened => "hardened",
    }
}

/// The hardened service runs the server-timeouts chapter's timeouts
/// (`HARDENED`, in production seconds) and, since hyper has none, a write
/// timeout: a client that reads nothing for this long is dropped.
pub const WRITE_S: f64 = 30.0;

/// Real (not compressed) numbers: CPU work and the database pool.
pub const REPORT_CPU: Duration = Duration::from_millis(300);
/// The hardened service's handler deadline is never compressed below this.
pub const MIN_DEADLINE: Duration = Duration::from_secs(1);
pub const POOL_SLOTS: usize = 4;
pub const POOL_HOLD: Duration = Duration::from_millis(100);
/// After SIGTERM: readiness 503 for this long, then no new connections and
/// at most `HARD_DEADLINE` for what is in flight (the lab's grace period is
/// 5 s; real ones are longer, and so would these be).
pub const DRAIN_WAIT: Duration = Duration::from_millis(200);
pub const HARD_DEADLINE: Duration = Duration::from_secs(3);
/// The hardened service lets this many wait for a slot, then sheds.
pub const QUEUE_LIMIT: usize = 4;

/// The Node server: Node's defaults, the same routes as the Rust services.
pub const NODE_SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/node/server.js");

/// The routes the doctor is pointed at, for the lab and the tests.
pub const PATHS: [(&str, &str); 5] = [
    ("--body-path", "/upload"),
    ("--read-path", "/big"),
    ("--slow-path", "/slow"),
    ("--heavy-path", "/report"),
    ("--load-path", "/work"),
];

struct Shared {
    pool: WorkPool,
    draining: AtomicBool,
    hardened: bool,
}

/// The database pool `/work` queues for: `POOL_SLOTS` slots, each held for
/// `POOL_HOLD`, and callers that wait for one.
pub struct WorkPool {
    slots: Semaphore,
    /// Callers holding or waiting for a slot.
    wanting: Gauge,
    /// How many may wait beyond the slots before `work` sheds; `None`
    /// queues every caller.
    queue_limit: Option<usize>,
}

/// A caller [`WorkPool::work`] turned away at once: too many already waited.
#[derive(Debug)]
pub struct Shed;

impl WorkPool {
    pub fn new(queue_limit: Option<usize>) -> WorkPool {
        WorkPool {
            slots: Semaphore::new(POOL_SLOTS),
            wanting: Gauge::new(),
            queue_limit,
        }
    }

    /// Holds a slot for `POOL_HOLD`; or, with more than the queue limit
    /// already waiting, sheds without waiting at all.
    pub async fn work(&self) -> Result<(), Shed> {
        let wanting = self.wanting.enter();
        let queued_past = |limit| wanting.on_entry() as usize > POOL_SLOTS + limit;
        if self.queue_limit.is_some_and(queued_past) {
            return Err(Shed);
        }
        // The semaphore is never closed, so this waits for a slot.
        let Ok(_slot) = self.slots.acquire().await else {
            return Err(Shed);
        };
        tokio::time::sleep(POOL_HOLD).await;
        Ok(())
    }
}

/// CPU work: hashing in a loop for `REPORT_CPU` of wall time.
fn compute_report() -> u64 {
    let started = Instant::now();
    let mut hash = 0xcbf29ce484222325u64;
    while started.elapsed() < REPORT_CPU {
        for byte in 0..=255u8 {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x100000001b3);
        }
    }
    hash
}

// ANCHOR: routes
fn routes(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(|| async { "ok\n" }))
        .route(
            "/upload",
            post(|body: Bytes| async move { format!("{} bytes\n", body.len()) }),
        )
        // 256 KiB: more than the socket buffers of a client that reads nothing.
        .route("/big", get(|| async { "x".repeat(256 * 1024) }))
        // A dependency that never answers.
        .route("/slow", get(std::future::pending::<&'static str>))
        .route("/report", get(report))
        .route("/work", get(work))
        .route("/readyz", get(readyz))
        .with_state(shared)
}

async fn report(State(shared): State<Arc<Shared>>) -> String {
    let hash = if shared.hardened {
        // Off the runtime's workers: they keep serving while this runs.
        tokio::task::spawn_blocking(compute_report)
            .await
            .unwrap_or(0)
    } else {
        // On a worker thread: nothing else runs there for 300 ms.
        compute_report()
    };
    format!("report {hash:x}\n")
}

async fn work(State(shared): State<Arc<Shared>>) -> Response {
    match shared.pool.work().await {
        Ok(()) => "done\n".into_response(),
        // Shed: the caller hears at once, and when to come back.
        Err(Shed) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(RETRY_AFTER, HeaderValue::from_static("1"))],
            "busy\n",
        )
            .into_response(),
    }
}

async fn readyz(State(shared): State<Arc<Shared>>) -> StatusCode {
    if shared.draining.load(Ordering::SeqCst) {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    }
}
// ANCHOR_END: routes

// ANCHOR: write_timeout
/// The hook that gives hyper a write timeout, which it lacks: a write that
/// has waited `limit` for the client to make room fails, and the failed
/// write ends the connection. One timer per connection, reset when a stall
/// begins, so a stall costs no allocation.
pub struct WriteTimer {
    limit: Duration,
    timer: Pin<Box<Sleep>>,
    /// Whether the timer is set for the stall under way.
    armed: bool,
}

impl WriteTimer {
    pub fn new(limit: Duration) -> WriteTimer {
        WriteTimer {
            limit,
            timer: Box::pin(tokio::time::sleep(limit)),
            armed: false,
        }
    }
}

impl StreamHook for WriteTimer {
    fn write_blocked(&mut self, context: &mut Context<'_>) -> Poll<io::Error> {
        if !self.armed {
            self.armed = true;
            let deadline = tokio::time::Instant::now() + self.limit;
            self.timer.as_mut().reset(deadline);
        }
        // Polling the timer is what asks the runtime to wake this task at
        // the deadline: a socket that never gets room never will.
        self.timer.as_mut().poll(context).map(|()| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing for the write timeout",
            )
        })
    }

    fn write_done(&mut self) {
        self.armed = false;
    }
}
// ANCHOR_END: write_timeout

/// An accepted connection whose stalled writes time out.
pub type WriteTimeout = HookedStream<WriteTimer>;

/// `lab-doctor serve stock|hardened --port P [--scale S]`: exit 0, or one
/// error line and exit 2.
pub fn serve_main(args: &[String]) -> ExitCode {
    lab_kit::exit::exit_code(concat!(env!("CARGO_PKG_NAME"), " serve"), serve(args))
}

fn serve(args: &[String]) -> Result<()> {
    let Some((which, flags)) = args.split_first() else {
        bail!("which service? stock-axum or hardened");
    };
    let service = Service::named(which)
        .with_context(|| format!("unknown service {which:?} (stock-axum or hardened)"))?;
    let (mut port, mut scale, mut graceful) = (0u16, 1.0f64, false);
    let mut parsed = Flags::new(flags).for_what("serve");
    while let Some(flag) = parsed.next_flag()? {
        match flag.name {
            "--port" => port = flag.parse("a port")?,
            "--scale" => scale = flag.parse("a number")?,
            // stock-axum with `with_graceful_shutdown` on SIGTERM (the
            // doctor's HTTP/2 tests: hyper's GOAWAY).
            "--graceful" => graceful = flag.parse("true or false")?,
            _ => return Err(flag.unknown()),
        }
    }
    if !(scale.is_finite() && scale >= 1.0) {
        bail!("--scale {scale} is not a number of 1 or more");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async move {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))
            .await
            .with_context(|| format!("binding 127.0.0.1:{port}"))?;
        match service {
            Service::Stock if graceful => serve_stock_graceful(listener).await,
            Service::Stock => serve_stock(listener).await,
            Service::Hardened => serve_hardened(listener, scale).await,
        }
    })
}

fn shared(hardened: bool) -> Arc<Shared> {
    Arc::new(Shared {
        pool: WorkPool::new(hardened.then_some(QUEUE_LIMIT)),
        draining: AtomicBool::new(false),
        hardened,
    })
}

// ANCHOR: stock
async fn serve_stock(listener: TcpListener) -> Result<()> {
    axum::serve(listener, routes(shared(false)))
        .await
        .context("serving")
}
// ANCHOR_END: stock

/// The stock service with axum's graceful shutdown on SIGTERM: in-flight
/// requests finish, and HTTP/2 connections are told GOAWAY.
async fn serve_stock_graceful(listener: TcpListener) -> Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listening for SIGTERM")?;
    axum::serve(listener, routes(shared(false)))
        .with_graceful_shutdown(async move {
            terminate.recv().await;
        })
        .await
        .context("serving")
}

// ANCHOR: hardened
async fn serve_hardened(listener: TcpListener, scale: f64) -> Result<()> {
    let at_scale = |seconds: f64| Duration::from_secs_f64(seconds / scale);
    let shared = shared(true);
    let app = routes(shared.clone())
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            // The report's CPU time is real, not compressed: a deadline
            // compressed below it would cut every report.
            at_scale(HARDENED.handler_deadline_s).max(MIN_DEADLINE),
        ))
        .layer(RequestBodyTimeoutLayer::new(at_scale(HARDENED.body_s)));
    let builder = http1_builder(Some(at_scale(HARDENED.header_read_s)));
    let write_limit = at_scale(WRITE_S);
    let graceful = GracefulShutdown::new();
    let serve = |stream: TcpStream| {
        let service = TowerToHyperService::new(app.clone());
        let io = TokioIo::new(WriteTimeout::new(stream, WriteTimer::new(write_limit)));
        let connection = graceful.watch(builder.serve_connection(io, service));
        tokio::spawn(async move {
            // A timeout or a client that left ends a connection with an error.
            let _ = connection.await;
        });
    };
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listening for SIGTERM")?;
    // After SIGTERM, readiness says 503 while the balancer notices, and new
    // connections are still served; then the server stops accepting and
    // lets what is in flight finish, within a hard deadline.
    let mut drain_until = None;
    loop {
        let drained = async {
            match drain_until {
                Some(until) => tokio::time::sleep_until(until).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    serve(stream);
                }
            }
            _ = terminate.recv(), if drain_until.is_none() => {
                shared.draining.store(true, Ordering::SeqCst);
                drain_until = Some(tokio::time::Instant::now() + DRAIN_WAIT);
            }
            () = drained => break,
        }
    }
    drop(listener);
    match tokio::time::timeout(HARD_DEADLINE, graceful.shutdown()).await {
        Ok(()) => Ok(()),
        Err(_) => bail!("connections still open {HARD_DEADLINE:?} after the drain; exiting"),
    }
}
// ANCHOR_END: hardened
