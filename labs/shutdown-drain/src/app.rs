//! The app the server child runs: health endpoints, short and slow work, a
//! server-sent-events stream, and a SQLite database every `/work` request
//! writes to. The same app is the healthy peer; only the server child is
//! ever signalled ([`crate::server`] holds its shutdown styles).

use std::{
    path::Path,
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
use lab_kit::clock::monotonic_ms;
use tokio::sync::watch;

use crate::events::EventLog;

/// What the handlers share.
pub struct ShutdownAppState {
    /// `/readyz` answers 200 while true.
    pub ready: AtomicBool,
    /// Every response gets `Connection: close` while true.
    pub draining: AtomicBool,
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

impl ShutdownAppState {
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
pub fn app(state: Arc<ShutdownAppState>) -> Router {
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
async fn readyz(State(state): State<Arc<ShutdownAppState>>) -> Response {
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
async fn track(
    State(state): State<Arc<ShutdownAppState>>,
    request: Request,
    next: Next,
) -> Response {
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

async fn work(State(state): State<Arc<ShutdownAppState>>, uri: Uri) -> Response {
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

async fn slow(State(state): State<Arc<ShutdownAppState>>, uri: Uri) -> &'static str {
    let millis = query_number(&uri, "ms").map_or(state.slow, Duration::from_millis);
    tokio::time::sleep(millis.min(Duration::from_secs(120))).await;
    "done\n"
}

/// Server-sent events: a tick every `stream_tick`. When told to end, the
/// stream sends `event: goaway` and keeps ticking until the client leaves:
/// cutting every stream at once would make every client reconnect at once;
/// the hard deadline bounds how long a client may take.
async fn events(State(state): State<Arc<ShutdownAppState>>) -> Response {
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

/// The app's state: the database at `db`, `/slow` working for `slow`, and
/// `/events` ticking every `stream_tick` until `goaway` says to end.
pub fn new_state(
    db: &Path,
    slow: Duration,
    stream_tick: Duration,
    goaway: watch::Receiver<bool>,
) -> Result<Arc<ShutdownAppState>> {
    Ok(Arc::new(ShutdownAppState {
        ready: AtomicBool::new(true),
        draining: AtomicBool::new(false),
        goaway,
        db: Mutex::new(Some(open_db(db)?)),
        in_flight: AtomicU64::new(0),
        last_response_bits: AtomicU64::new(0f64.to_bits()),
        slow,
        stream_tick,
    }))
}

/// Closes the database handle; logs when, and what was still in flight.
pub fn close_db(state: &ShutdownAppState, events: &EventLog) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_numbers_from_the_query() {
        let uri: Uri = "/work?x=1&id=42".parse().expect("a uri");
        assert_eq!(query_number(&uri, "id"), Some(42));
        assert_eq!(query_number(&uri, "ms"), None);
    }
}
