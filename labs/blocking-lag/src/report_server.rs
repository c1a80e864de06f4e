//! The report server of the streaming part, a process of its own: the orders
//! database, `/health`, and `/report` delivered one way (in memory or
//! streamed in pages), on two workers as in the fixes.
//!
//! A process of its own so that its resident memory is its report's and
//! nothing else's: the lab's own process has built dozens of reports by then,
//! and freed memory is not always given back to the kernel. The lab binary
//! re-executes itself as `lab-blocking-lag __report_server --delivery ...`;
//! it prints one JSON line when it listens, serves until its stdin closes,
//! then prints one more line and exits.

use std::{
    io::{BufRead, Write},
    net::SocketAddr,
    process::ExitCode,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result};
use axum::{
    Router,
    body::{Body, Bytes},
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use lab_kit::{clock::monotonic_ms, flags::Flags};
use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::{
    orders::{DB_NAME, open_orders, report_in_memory, report_in_pages},
    server::Flavour,
};

/// The hidden subcommand that turns the lab binary into a report server.
pub const SUBCOMMAND: &str = "__report_server";

lab_kit::series! {
    /// How `/report` hands the orders to the client.
    pub enum Delivery in "stream" {
        /// Read every order, render the whole CSV, answer with one body.
        InMemory => "in-memory",
        /// Read a page, send it, read the next: the body leaves as it is read.
        Streamed => "streamed",
    }
}

/// What the report server does, from its command line.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportServerArgs {
    pub delivery: Delivery,
    pub rows: usize,
    pub page_rows: usize,
    /// The server stops by itself after this, whatever the parent does.
    pub max: Duration,
    /// For the lab's test: the streamed read fails after this many pages,
    /// as a database that went away halfway would.
    pub fail_after_pages: Option<u64>,
}

impl ReportServerArgs {
    pub fn to_args(&self) -> Vec<String> {
        let mut args = vec![
            SUBCOMMAND.into(),
            "--delivery".into(),
            self.delivery.name().into(),
            "--rows".into(),
            self.rows.to_string(),
            "--page-rows".into(),
            self.page_rows.to_string(),
            "--max-ms".into(),
            self.max.as_millis().to_string(),
        ];
        if let Some(pages) = self.fail_after_pages {
            args.extend(["--fail-after-pages".into(), pages.to_string()]);
        }
        args
    }

    /// Parses the arguments after the subcommand.
    pub fn parse(args: &[String]) -> Result<ReportServerArgs> {
        let mut delivery = None;
        let mut rows = 10_000;
        let mut page_rows = 1_000;
        let mut max = Duration::from_secs(60);
        let mut fail_after_pages = None;
        let mut flags = Flags::new(args).for_what("report server");
        while let Some(flag) = flags.next_flag()? {
            match flag.name {
                "--delivery" => {
                    delivery = Some(Delivery::named(flag.value).with_context(|| {
                        format!("--delivery {:?} is not in-memory or streamed", flag.value)
                    })?)
                }
                "--rows" => rows = flag.parse("a count")?,
                "--page-rows" => page_rows = flag.parse("a count")?,
                "--max-ms" => max = flag.millis()?,
                "--fail-after-pages" => fail_after_pages = Some(flag.parse("a count")?),
                _ => return Err(flag.unknown()),
            }
        }
        Ok(ReportServerArgs {
            delivery: delivery.context("--delivery is required")?,
            rows,
            page_rows: page_rows.max(1),
            max,
            fail_after_pages,
        })
    }
}

/// What the report server prints: one line when it listens, one when it ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "line", rename_all = "kebab-case")]
pub enum ServerLine {
    Ready {
        addr: SocketAddr,
        /// How long filling the database took.
        build_ms: f64,
        /// Whether the kernel's peak (`VmHWM`) was reset after the build, so
        /// that it is the report's peak, not the build's.
        peak_reset: bool,
    },
    Done {
        /// Pages the streamed report sent (0 for the report in memory).
        pages: u64,
    },
}

/// The `main` of the report server process: errors printed once, exit 2.
pub fn report_server_main(args: &[String]) -> ExitCode {
    lab_kit::exit::exit_code(
        "report server",
        ReportServerArgs::parse(args).and_then(serve),
    )
}

struct ReportState {
    db: Arc<Mutex<Connection>>,
    delivery: Delivery,
    page_rows: usize,
    pages: Arc<AtomicU64>,
    fail_after_pages: Option<u64>,
}

fn serve(args: ReportServerArgs) -> Result<()> {
    let started_ms = monotonic_ms();
    let connection = open_orders(DB_NAME, args.rows)?;
    let build_ms = monotonic_ms() - started_ms;
    let state = Arc::new(ReportState {
        db: Arc::new(Mutex::new(connection)),
        delivery: args.delivery,
        page_rows: args.page_rows,
        pages: Arc::new(AtomicU64::new(0)),
        fail_after_pages: args.fail_after_pages,
    });
    let app = Router::new()
        .route("/health", get(|| async { "ok\n" }))
        .route("/report", get(report))
        .with_state(Arc::clone(&state));
    let runtime = Flavour::MultiThread { workers: 2 }.runtime()?;
    runtime.block_on(async move {
        let listener = lab_kit::net::bind_loopback().await?;
        let addr = listener.local_addr().context("reading the bound address")?;
        print_line(&ServerLine::Ready {
            addr,
            build_ms,
            peak_reset: reset_peak(),
        })?;
        let stop = stdin_closed()?;
        let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = tokio::time::timeout(args.max, stop).await;
        });
        // Bounded even if a client keeps a connection open.
        tokio::time::timeout(args.max + Duration::from_secs(2), serve)
            .await
            .map_or(Ok(()), |served| served.context("serving"))
    })?;
    runtime.shutdown_timeout(Duration::from_millis(500));
    print_line(&ServerLine::Done {
        pages: state.pages.load(Ordering::SeqCst),
    })
}

/// Resolves when the parent closes our stdin (or dies, which closes it too).
/// A plain thread reads it, so a blocking read never holds up the exit.
fn stdin_closed() -> Result<oneshot::Receiver<()>> {
    let (closed, stdin_closed) = oneshot::channel();
    std::thread::Builder::new()
        .name("report-stdin".into())
        .spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::stdin().lock().read_until(0, &mut sink);
            let _ = closed.send(());
        })
        .context("starting the stdin watcher")?;
    Ok(stdin_closed)
}

/// Resets this process's `VmHWM` to its current resident size (writing `5`
/// to `/proc/self/clear_refs`, Linux 4.0 and later); false where refused.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn print_line(line: &ServerLine) -> Result<()> {
    let text = serde_json::to_string(line).context("encoding a server line")?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}").context("writing to the parent")?;
    stdout.flush().context("flushing to the parent")
}

/// A page of the streamed body, or the error that ends it.
type Page = Result<Bytes, std::io::Error>;

// ANCHOR: handler
/// GET /report. Both deliveries read SQLite on the blocking pool (rusqlite
/// is synchronous); they differ in what the handler answers with.
async fn report(State(state): State<Arc<ReportState>>) -> Result<Response, StatusCode> {
    let db = Arc::clone(&state.db);
    let csv = [(header::CONTENT_TYPE, "text/csv")];
    match state.delivery {
        // Every row, then the whole CSV, then the answer: one body of the
        // report's size, and no byte leaves before the last row is read.
        Delivery::InMemory => {
            let body = tokio::task::spawn_blocking(move || {
                report_in_memory(&db.lock().expect("the database lock is never poisoned"))
            })
            .await
            .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?
            .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
            Ok((csv, body).into_response())
        }
        // A reader on the blocking pool sends each page into a channel of
        // two; the body is that channel. The reader waits whenever two
        // pages are queued, so memory holds a few pages, whatever the size
        // of the report. When the client leaves, hyper drops the body, the
        // send fails and the reader stops.
        Delivery::Streamed => {
            let (pages, body) = mpsc::channel::<Page>(2);
            let (page_rows, sent) = (state.page_rows, Arc::clone(&state.pages));
            let fail_after = state.fail_after_pages;
            tokio::task::spawn_blocking(move || {
                let connection = db.lock().expect("the database lock is never poisoned");
                let read = report_in_pages(&connection, page_rows, |page| {
                    let sent = sent.fetch_add(1, Ordering::SeqCst) + 1;
                    pages.blocking_send(Ok(Bytes::from(page))).is_ok() && Some(sent) != fail_after
                })
                // The lab's test breaks the read halfway (`--fail-after-pages`).
                .and_then(|read| match fail_after {
                    Some(limit) if read as u64 >= limit => {
                        Err(anyhow::anyhow!("the read failed after {limit} pages"))
                    }
                    _ => Ok(read),
                });
                if let Err(error) = read {
                    // The 200 and the first pages have left: the only way to
                    // say "broken" now is to end the body with an error, so
                    // hyper cuts the connection without the last chunk and
                    // the client cannot take half a report for all of it.
                    let _ = pages.blocking_send(Err(std::io::Error::other(format!("{error:#}"))));
                }
            });
            let stream = futures_util::stream::unfold(body, |mut body| async move {
                body.recv().await.map(|page| (page, body))
            });
            Ok((csv, Body::from_stream(stream)).into_response())
        }
    }
}
// ANCHOR_END: handler
