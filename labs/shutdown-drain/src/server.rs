//! The server under test: health endpoints, short and slow work, a
//! server-sent-events stream, and a SQLite database every `/work` request
//! writes to. The lab runs it as a real child process (`lab-shutdown-drain
//! __server ...`) and stops it with a real SIGTERM; how it reacts depends on
//! the [`Variant`].

use std::{
    future::IntoFuture,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result, bail};
use axum::{
    Router,
    body::Body,
    extract::{Request, State},
    http::{HeaderValue, StatusCode, Uri, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::get,
};
use lab_kit::{clock::monotonic_ms, flags::Flags};
use tokio::{
    net::TcpListener,
    signal::unix::{SignalKind, signal},
    sync::{oneshot, watch},
    time::Instant,
};

use crate::events::EventLog;

/// How the server reacts to SIGTERM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// No handler: SIGTERM's default action ends the process on the spot.
    ExitAtOnce,
    /// `axum::serve(..).with_graceful_shutdown(sigterm)` and nothing else.
    GracefulOnly,
    /// Readiness first, a wait, stop accepting, drain, tell streams to end,
    /// close the database, exit 0; a hard deadline exits 1.
    Full,
    /// Catches SIGTERM and does nothing: a test fixture for the probe.
    IgnoreSigterm,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::ExitAtOnce => "exit-at-once",
            Variant::GracefulOnly => "graceful-only",
            Variant::Full => "full",
            Variant::IgnoreSigterm => "ignore-sigterm",
        }
    }

    pub fn parse(text: &str) -> Result<Variant> {
        Ok(match text {
            "exit-at-once" => Variant::ExitAtOnce,
            "graceful-only" => Variant::GracefulOnly,
            "full" => Variant::Full,
            "ignore-sigterm" => Variant::IgnoreSigterm,
            other => bail!(
                "unknown variant {other:?} (exit-at-once, graceful-only, full, ignore-sigterm)"
            ),
        })
    }
}

/// The server's knobs, all passed on its command line by the lab.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub variant: Variant,
    /// After SIGTERM, how long to keep serving with readiness at 503 so the
    /// balancer notices (what a preStop `sleep` does in Kubernetes).
    pub drain_wait: Duration,
    /// From SIGTERM to a forced `exit(1)`; below the orchestrator's grace.
    pub hard_deadline: Duration,
    /// How long `/slow` works unless `?ms=` says otherwise.
    pub slow: Duration,
    /// The interval between events on `/events`.
    pub stream_tick: Duration,
    pub db: PathBuf,
    /// 0 lets the kernel pick.
    pub port: u16,
    /// Where to write the bound port (written whole: temp file, rename).
    pub port_file: Option<PathBuf>,
    pub events: Option<PathBuf>,
}

/// What the handlers share.
struct AppState {
    /// `/readyz` answers 200 while true.
    ready: AtomicBool,
    /// Every response gets `Connection: close` while true.
    draining: AtomicBool,
    /// Flips to true when streams are told to end.
    goaway: watch::Receiver<bool>,
    /// The database handle. `None` once closed: a write after that is a bug
    /// in the shutdown order, and answers 500 rather than hiding it.
    db: Mutex<Option<rusqlite::Connection>>,
    in_flight: AtomicU64,
    /// CLOCK_MONOTONIC ms, as f64 bits, of the last response handed to hyper.
    last_response_bits: AtomicU64,
    slow: Duration,
    stream_tick: Duration,
}

impl AppState {
    fn last_response_ms(&self) -> f64 {
        f64::from_bits(self.last_response_bits.load(Ordering::SeqCst))
    }
}

/// Opens (and creates) the database: one table, one row per `/work` request.
pub fn open_db(path: &Path) -> Result<rusqlite::Connection> {
    let connection = rusqlite::Connection::open(path)
        .with_context(|| format!("opening the database {}", path.display()))?;
    // WAL: a committed write survives the process being killed (not a power
    // cut, with synchronous=NORMAL), which is the failure this lab produces.
    connection
        .execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS writes (
                 row INTEGER PRIMARY KEY AUTOINCREMENT,
                 request_id INTEGER NOT NULL,
                 written_ms REAL NOT NULL
             );",
        )
        .context("creating the writes table")?;
    Ok(connection)
}

/// The request ids present in a database file.
pub fn written_ids(path: &Path) -> Result<Vec<i64>> {
    let connection = rusqlite::Connection::open(path)
        .with_context(|| format!("opening the database {}", path.display()))?;
    let mut statement = connection
        .prepare("SELECT request_id FROM writes ORDER BY row")
        .context("preparing the read")?;
    let ids = statement
        .query_map([], |row| row.get::<_, i64>(0))
        .context("reading the writes")?
        .collect::<rusqlite::Result<Vec<i64>>>()
        .context("reading a row")?;
    Ok(ids)
}

fn query_number(uri: &Uri, key: &str) -> Option<u64> {
    uri.query()?.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        (name == key).then(|| value.parse().ok()).flatten()
    })
}

// ANCHOR: routes
/// The routes. Liveness never touches the database; readiness reads a flag.
fn app(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/livez", get(|| async { "alive\n" }))
        .route("/readyz", get(readyz))
        .route("/work", get(work).post(work))
        .route("/slow", get(slow))
        .route("/events", get(events))
        .layer(middleware::from_fn_with_state(Arc::clone(&state), track))
        .with_state(state)
}
// ANCHOR_END: routes

// ANCHOR: readyz
async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.ready.load(Ordering::SeqCst) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        // Not ready is not dead: the balancer stops routing here, the
        // orchestrator does not restart the process.
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response()
    }
}
// ANCHOR_END: readyz

/// Counts requests in flight, remembers when the last response left, and
/// marks every response `Connection: close` while draining, so a client or
/// balancer stops reusing this connection as soon as its request is done.
async fn track(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    state.in_flight.fetch_add(1, Ordering::SeqCst);
    let mut response = next.run(request).await;
    if state.draining.load(Ordering::SeqCst) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    state
        .last_response_bits
        .store(monotonic_ms().to_bits(), Ordering::SeqCst);
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    response
}

async fn work(State(state): State<Arc<AppState>>, uri: Uri) -> Response {
    let request_id = query_number(&uri, "id").unwrap_or(0) as i64;
    // SQLite calls block: run them on the blocking pool, not on a runtime worker.
    let written = tokio::task::spawn_blocking(move || -> Result<i64> {
        let guard = state
            .db
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(connection) = guard.as_ref() else {
            bail!("the database is already closed");
        };
        connection.execute(
            "INSERT INTO writes (request_id, written_ms) VALUES (?1, ?2)",
            rusqlite::params![request_id, monotonic_ms()],
        )?;
        Ok(connection.last_insert_rowid())
    })
    .await;
    match written {
        // The row is committed before this 200 leaves: an acknowledged write
        // is a durable one.
        Ok(Ok(row)) => (StatusCode::OK, format!("{{\"row\":{row}}}\n")).into_response(),
        Ok(Err(error)) => {
            (StatusCode::INTERNAL_SERVER_ERROR, format!("{error:#}\n")).into_response()
        }
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "the write panicked\n").into_response(),
    }
}

async fn slow(State(state): State<Arc<AppState>>, uri: Uri) -> &'static str {
    let millis = query_number(&uri, "ms").map_or(state.slow, Duration::from_millis);
    tokio::time::sleep(millis.min(Duration::from_secs(120))).await;
    "done\n"
}

/// Server-sent events: a tick every `stream_tick`. When told to end, the
/// stream sends `event: goaway` and keeps ticking until the client leaves:
/// cutting every stream at once would make every client reconnect at once;
/// the hard deadline bounds how long a client may take.
async fn events(State(state): State<Arc<AppState>>) -> Response {
    let tick = state.stream_tick;
    let goaway = state.goaway.clone();
    let stream = futures_util::stream::unfold(
        (goaway, 0u64, false),
        move |(mut goaway, count, told)| async move {
            if !told && *goaway.borrow_and_update() {
                let frame = "event: goaway\ndata: reconnect elsewhere\n\n".to_string();
                return Some((Ok::<_, std::io::Error>(frame), (goaway, count, true)));
            }
            tokio::select! {
                _ = tokio::time::sleep(tick) => {}
                // Wake early when told, so the goaway goes out at once.
                changed = goaway.changed(), if !told => {
                    if changed.is_err() {
                        // The sender is gone (the server is exiting): just tick.
                        tokio::time::sleep(tick).await;
                    }
                }
            }
            Some((Ok(format!("data: {count}\n\n")), (goaway, count + 1, told)))
        },
    );
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn new_state(config: &ServerConfig, goaway: watch::Receiver<bool>) -> Result<Arc<AppState>> {
    Ok(Arc::new(AppState {
        ready: AtomicBool::new(true),
        draining: AtomicBool::new(false),
        goaway,
        db: Mutex::new(Some(open_db(&config.db)?)),
        in_flight: AtomicU64::new(0),
        last_response_bits: AtomicU64::new(0f64.to_bits()),
        slow: config.slow,
        stream_tick: config.stream_tick,
    }))
}

/// Closes the database handle; logs when, and what was still in flight.
fn close_db(state: &AppState, events: &EventLog) -> Result<()> {
    let connection = state
        .db
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take();
    if let Some(connection) = connection {
        connection
            .close()
            .map_err(|(_, error)| error)
            .context("closing the database")?;
    }
    events.log_value("last_response", state.last_response_ms());
    events.log_value("db_closed", state.in_flight.load(Ordering::SeqCst) as f64);
    Ok(())
}

/// Runs the server until its variant decides to exit; returns the exit code.
pub async fn serve(config: ServerConfig) -> Result<i32> {
    let events = EventLog::open(config.events.as_deref())?;
    let (goaway_sender, goaway) = watch::channel(false);
    let state = new_state(&config, goaway)?;
    // Register the handler before announcing the port: a SIGTERM that comes
    // right after the lab learns the port must find it installed.
    let sigterm = match config.variant {
        Variant::ExitAtOnce => None,
        _ => Some(signal(SignalKind::terminate()).context("installing the SIGTERM handler")?),
    };
    let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, config.port))
        .await
        .with_context(|| format!("binding 127.0.0.1:{}", config.port))?;
    let port = listener
        .local_addr()
        .context("reading the bound port")?
        .port();
    if let Some(port_file) = &config.port_file {
        let temporary = port_file.with_extension("tmp");
        std::fs::write(&temporary, port.to_string()).context("writing the port file")?;
        std::fs::rename(&temporary, port_file).context("renaming the port file")?;
    }
    events.log_value("listening", f64::from(port));
    eprintln!(
        "server: {} listening on 127.0.0.1:{port}",
        config.variant.name()
    );
    let app = app(Arc::clone(&state));
    match (config.variant, sigterm) {
        (Variant::ExitAtOnce, _) | (_, None) => {
            // ANCHOR: exit_at_once
            // No SIGTERM handler at all: the kernel's default action ends the
            // process the moment the signal arrives. Sockets close mid-response.
            axum::serve(listener, app).await.context("serving")?;
            // ANCHOR_END: exit_at_once
            Ok(0)
        }
        (Variant::IgnoreSigterm, Some(mut sigterm)) => {
            let server = tokio::spawn(axum::serve(listener, app).into_future());
            while sigterm.recv().await.is_some() {
                events.log("sigterm_ignored");
            }
            server.await.context("the server task failed")??;
            Ok(0)
        }
        (Variant::GracefulOnly, Some(mut sigterm)) => {
            // ANCHOR: graceful_only
            let logged = events.clone();
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    sigterm.recv().await;
                    logged.log("sigterm");
                    logged.log("stop_accepting");
                })
                .await
                .context("serving")?;
            // Reached only when every connection has closed: a stream that
            // never ends keeps the process here until SIGKILL.
            // ANCHOR_END: graceful_only
            events.log("drained");
            close_db(&state, &events)?;
            Ok(0)
        }
        (Variant::Full, Some(sigterm)) => {
            full_sequence(
                listener,
                app,
                &state,
                &config,
                sigterm,
                goaway_sender,
                &events,
            )
            .await
        }
    }
}

// ANCHOR: full_sequence
/// The whole shutdown sequence, in order, with a hard deadline.
async fn full_sequence(
    listener: TcpListener,
    app: Router,
    state: &AppState,
    config: &ServerConfig,
    mut sigterm: tokio::signal::unix::Signal,
    goaway: watch::Sender<bool>,
    events: &EventLog,
) -> Result<i32> {
    let (stop_accepting, stop_accepting_signal) = oneshot::channel::<()>();
    let server = tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop_accepting_signal.await;
            })
            .into_future(),
    );

    sigterm.recv().await;
    let deadline = Instant::now() + config.hard_deadline;
    events.log("sigterm");

    // 1. Readiness first: the balancer's next poll sees 503 and stops routing
    //    here. Responses from now on carry `Connection: close`.
    state.ready.store(false, Ordering::SeqCst);
    state.draining.store(true, Ordering::SeqCst);
    events.log("not_ready");

    // 2. Keep serving while the balancer notices: requests it already routed
    //    here, and those it routes before its next poll, still succeed.
    tokio::time::sleep(config.drain_wait).await;

    // 3. Stop accepting; hyper closes idle keep-alive connections at once and
    //    lets in-flight requests finish with `Connection: close`.
    let _ = stop_accepting.send(());
    events.log("stop_accepting");

    // 4. Tell streams to end (they send `goaway`; clients leave).
    let _ = goaway.send(true);
    events.log("streams_told");

    // 5. Wait for every connection to close, but never past the deadline.
    match tokio::time::timeout_at(deadline, server).await {
        Ok(joined) => joined
            .context("the server task panicked")?
            .context("serving")?,
        Err(_) => {
            events.log("deadline");
            // Exit non-zero so the orchestrator and the logs say it was forced.
            return Ok(1);
        }
    }
    events.log("drained");

    // 6. Only now close the database: no request is left that could use it.
    close_db(state, events)?;
    Ok(0)
}
// ANCHOR_END: full_sequence

/// Serves the same app in this process, never signalled: the healthy peer
/// behind the balancer. Dropping the returned task handle does not stop it;
/// abort it.
pub async fn spawn_peer(
    db: &Path,
    stream_tick: Duration,
) -> Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>)> {
    let (_goaway_sender, goaway) = watch::channel(false);
    let config = ServerConfig {
        variant: Variant::Full,
        drain_wait: Duration::ZERO,
        hard_deadline: Duration::ZERO,
        slow: Duration::from_millis(100),
        stream_tick,
        db: db.to_path_buf(),
        port: 0,
        port_file: None,
        events: None,
    };
    let state = new_state(&config, goaway)?;
    let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .await
        .context("binding the peer")?;
    let addr = listener
        .local_addr()
        .context("reading the peer's address")?;
    let task = tokio::spawn(async move {
        let _keep_goaway_open = _goaway_sender;
        let _ = axum::serve(listener, app(state)).await;
    });
    Ok((addr, task))
}

/// `lab-shutdown-drain __server --variant V --db PATH [--port P]
/// [--port-file PATH] [--events PATH] [--drain-wait-ms N] [--deadline-ms N]
/// [--slow-ms N] [--tick-ms N]`: the child process. Exits with the code the
/// variant chose (or by the signal, for `exit-at-once`).
pub fn server_main(args: &[String]) -> Result<i32> {
    let config = parse_server_args(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let events = EventLog::open(config.events.as_deref())?;
    let code = runtime.block_on(serve(config))?;
    events.log_value("exit", f64::from(code));
    // `process::exit` in the caller does not wait for tasks still running
    // (a stream the deadline gave up on): that is the point of a deadline.
    Ok(code)
}

fn parse_server_args(args: &[String]) -> Result<ServerConfig> {
    let mut config = ServerConfig {
        variant: Variant::Full,
        drain_wait: Duration::from_millis(400),
        hard_deadline: Duration::from_millis(1000),
        slow: Duration::from_millis(800),
        stream_tick: Duration::from_millis(50),
        db: PathBuf::new(),
        port: 0,
        port_file: None,
        events: None,
    };
    let mut flags = Flags::new(args).for_what("server");
    while let Some(flag) = flags.next_flag()? {
        match flag.name {
            "--variant" => config.variant = Variant::parse(flag.value)?,
            "--db" => config.db = PathBuf::from(flag.value),
            "--port" => config.port = flag.parse("a port")?,
            "--port-file" => config.port_file = Some(PathBuf::from(flag.value)),
            "--events" => config.events = Some(PathBuf::from(flag.value)),
            "--drain-wait-ms" => config.drain_wait = flag.millis()?,
            "--deadline-ms" => config.hard_deadline = flag.millis()?,
            "--slow-ms" => config.slow = flag.millis()?,
            "--tick-ms" => config.stream_tick = flag.millis()?,
            _ => return Err(flag.unknown()),
        }
    }
    if config.db.as_os_str().is_empty() {
        bail!("--db PATH is required");
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_its_command_line() {
        let args: Vec<String> = [
            "--variant",
            "graceful-only",
            "--db",
            "/tmp/x.db",
            "--deadline-ms",
            "250",
        ]
        .map(String::from)
        .to_vec();
        let config = parse_server_args(&args).expect("valid");
        assert_eq!(config.variant, Variant::GracefulOnly);
        assert_eq!(config.hard_deadline, Duration::from_millis(250));
        assert!(parse_server_args(&["--variant".into()]).is_err());
        assert!(parse_server_args(&["--variant".into(), "full".into()]).is_err());
        assert!(parse_server_args(&["--bogus".into(), "1".into()]).is_err());
    }

    #[test]
    fn reads_numbers_from_the_query() {
        let uri: Uri = "/work?x=1&id=42".parse().expect("a uri");
        assert_eq!(query_number(&uri, "id"), Some(42));
        assert_eq!(query_number(&uri, "ms"), None);
    }
}
