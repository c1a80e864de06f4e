//! The database every experiment queries: SQLite (bundled) behind a pool of
//! a few connections, a query that is really slow (a recursive CTE counts
//! rows one by one inside SQLite's VM), and the one way such a query learns
//! that nobody waits for it any more: a progress handler, polled by the VM
//! every [`PROGRESS_EVERY`] instructions, that returns `true` to stop it.
//!
//! Why a progress handler and not `InterruptHandle::interrupt`: an interrupt
//! that arrives while no statement runs is a no-op, so a cancellation that
//! lands between "got a connection" and "statement started" would be lost.
//! The progress handler asks the question on every few thousand instructions
//! of the statement itself, so no cancellation can fall into a gap.
//!
//! No file outlives the lab, even a killed one, because there is no file:
//! every pooled connection opens the same database in SQLite's `memdb` VFS
//! (`file:/name?vfs=memdb`, a name that starts with `/` is shared by every
//! connection of the process). Each connection keeps its own page cache and
//! the VFS does the locking, as with a file on disk, but the bytes live in
//! the process's memory and die with it, SIGKILL included.

use std::{
    collections::BTreeSet,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use deadpool::unmanaged::Pool;
use rusqlite::{Connection, OpenFlags};
use tokio_util::sync::CancellationToken;

/// SQLite VM instructions between two calls of the progress handler.
pub const PROGRESS_EVERY: i32 = 1000;

/// The slow query: count to `?1`, one recursive step a row.
const SLOW_QUERY: &str = "WITH RECURSIVE counter(n) AS (SELECT 1 UNION ALL \
     SELECT n + 1 FROM counter WHERE n < ?1) SELECT count(*) FROM counter";

/// What may stop a query before it ends on its own.
#[derive(Debug, Clone, Default)]
pub struct QueryStop {
    /// A query timeout: stop at this instant.
    pub deadline: Option<Instant>,
    /// QueryStop when this token is cancelled (the request that wanted the
    /// answer is gone).
    pub token: Option<CancellationToken>,
}

impl QueryStop {
    fn now(&self) -> bool {
        self.deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
            || self
                .token
                .as_ref()
                .is_some_and(|token| token.is_cancelled())
    }
}

/// How a query ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryEnd {
    Completed,
    Interrupted,
    Failed,
    /// Its stop had already come when a connection was free: refused
    /// rather than started.
    NotStarted,
}

impl QueryEnd {
    pub fn name(self) -> &'static str {
        match self {
            QueryEnd::Completed => "completed",
            QueryEnd::Interrupted => "interrupted",
            QueryEnd::Failed => "failed",
            QueryEnd::NotStarted => "not-started",
        }
    }
}

/// The pool, and the queries running in SQLite right now (by tag).
pub struct SlowDatabase {
    /// The pool's connections, all to the one database of this pool.
    pub pool: Pool<Connection>,
    pub size: usize,
    running: Arc<Mutex<BTreeSet<u64>>>,
    /// Rows the slow query counts per millisecond on this machine, alone.
    pub rows_per_ms: f64,
}

impl SlowDatabase {
    /// Opens `size` connections to a fresh in-memory database (see the
    /// module comment), one name per call so two pools never share tables,
    /// and times the slow query on it.
    pub fn open(size: usize) -> Result<SlowDatabase> {
        SlowDatabase::open_at(size, None)
    }

    /// As [`SlowDatabase::open`], with the slow query's speed measured
    /// before (`Some(rows_per_ms)`), so that several databases run the same
    /// queries: a speed timed again for each could differ by a passing load.
    pub fn open_at(size: usize, rows_per_ms: Option<f64>) -> Result<SlowDatabase> {
        static OPENED: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "file:/cancellation-{}-{}?vfs=memdb",
            std::process::id(),
            OPENED.fetch_add(1, Ordering::Relaxed)
        );
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut connections = Vec::with_capacity(size);
        for _ in 0..size {
            let connection = Connection::open_with_flags(&name, flags)
                .with_context(|| format!("opening {name}"))?;
            connection
                .execute_batch(
                    "PRAGMA journal_mode = MEMORY; PRAGMA temp_store = MEMORY; \
                     PRAGMA busy_timeout = 5000; \
                     CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, request INTEGER)",
                )
                .context("setting up the database")?;
            connections.push(connection);
        }
        let rows_per_ms = match rows_per_ms {
            Some(rows_per_ms) => rows_per_ms,
            None => calibrate(&connections[0]).context("timing the slow query")?,
        };
        Ok(SlowDatabase {
            pool: Pool::from(connections),
            size,
            running: Arc::default(),
            rows_per_ms,
        })
    }

    /// The rows that keep the slow query busy for about `duration`, alone.
    pub fn rows_for(&self, duration: Duration) -> i64 {
        (self.rows_per_ms * duration.as_secs_f64() * 1000.0).max(1.0) as i64
    }

    /// Tags of the queries running in SQLite now.
    pub fn running(&self) -> BTreeSet<u64> {
        self.running
            .lock()
            .expect("the running set is not poisoned")
            .clone()
    }

    // ANCHOR: query
    /// Waits for a pooled connection, then runs the slow query on the
    /// blocking pool, unless its stop has come while it waited (a deadline
    /// already passed is work for nobody). `on_end` runs on the blocking
    /// thread when SQLite is done, with the instant the statement started,
    /// so it reports even if the caller's future was dropped meanwhile:
    /// dropping a `spawn_blocking` handle does not stop the closure.
    pub async fn slow_query(
        &self,
        tag: u64,
        rows: i64,
        stop: QueryStop,
        on_end: impl FnOnce(QueryEnd, Instant) + Send + 'static,
    ) -> Result<QueryEnd> {
        let mut connection = self.pool.get().await.context("the pool is closed")?;
        if stop.now() {
            on_end(QueryEnd::NotStarted, Instant::now());
            return Ok(QueryEnd::NotStarted);
        }
        let running = Arc::clone(&self.running);
        let blocking = tokio::task::spawn_blocking(move || {
            let began = Instant::now();
            running.lock().expect("not poisoned").insert(tag);
            // Returning true from the handler makes SQLite stop the
            // statement with SQLITE_INTERRUPT.
            let checker = stop.clone();
            let outcome = connection
                .progress_handler(PROGRESS_EVERY, Some(move || checker.now()))
                .and_then(|()| {
                    connection.query_row(SLOW_QUERY, [rows], |row| row.get::<_, i64>(0))
                });
            let end = match outcome {
                Ok(_) => QueryEnd::Completed,
                Err(rusqlite::Error::SqliteFailure(error, _))
                    if error.code == rusqlite::ErrorCode::OperationInterrupted =>
                {
                    QueryEnd::Interrupted
                }
                Err(_) => QueryEnd::Failed,
            };
            let _ = connection.progress_handler(0, None::<fn() -> bool>);
            running.lock().expect("not poisoned").remove(&tag);
            on_end(end, began);
            end
            // `connection` drops here: back to the pool.
        });
        blocking.await.context("the query's blocking task panicked")
    }
    // ANCHOR_END: query

    /// Records an order: the side effect a request exists for.
    pub async fn place_order(&self, request: u64) -> Result<()> {
        let connection = self.pool.get().await.context("the pool is closed")?;
        tokio::task::spawn_blocking(move || {
            connection
                .execute("INSERT INTO orders (request) VALUES (?1)", [request as i64])
                .map(|_| ())
        })
        .await
        .context("the insert's blocking task panicked")?
        .context("inserting an order")
    }

    /// Orders placed for `request`.
    pub async fn orders_for(&self, request: u64) -> Result<i64> {
        let connection = self.pool.get().await.context("the pool is closed")?;
        tokio::task::spawn_blocking(move || {
            connection.query_row(
                "SELECT count(*) FROM orders WHERE request = ?1",
                [request as i64],
                |row| row.get::<_, i64>(0),
            )
        })
        .await
        .context("the count's blocking task panicked")?
        .context("counting orders")
    }
}

/// Rows a millisecond, the fastest of five timed runs (a passing load slows
/// one run, not the fastest of five).
fn calibrate(connection: &Connection) -> Result<f64> {
    let rows = 200_000_i64;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let started = Instant::now();
        connection.query_row(SLOW_QUERY, [rows], |row| row.get::<_, i64>(0))?;
        best = best.min(started.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(rows as f64 / best.max(0.01))
}
