//! Does the work stop when the client leaves? A client sends one request and
//! gives up after a short time (reqwest's per-request timeout drops the
//! request future: over HTTP/1.1 that closes the connection, over HTTP/2 it
//! resets the stream). The handler, in five variants, calls a slow
//! downstream and runs a slow query side by side; the downstream and the
//! database mark when they stopped.

use std::{sync::Arc, time::Duration};

use anyhow::{Context, Result};
use axum::{Router, extract::State, routing::get};
use lab_kit::server::spawn_axum;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::{
    Config,
    db::{Database, Stop},
    downstream,
    probe::Probe,
};

/// How the handler runs its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Awaits the downstream and the query in the handler's own future.
    Plain,
    /// Moves the work into `tokio::spawn` and awaits the join handle.
    Spawn,
    /// Runs the work on the blocking pool (`spawn_blocking` + `block_on`).
    SpawnBlocking,
    /// Spawns the work, but a `CancellationToken` tied to the request (a
    /// drop guard in the handler) stops the spawned task.
    Token,
    /// The same, with the token also handed to the query.
    TokenInterrupt,
}

impl Variant {
    pub const ALL: [Variant; 5] = [
        Variant::Plain,
        Variant::Spawn,
        Variant::SpawnBlocking,
        Variant::Token,
        Variant::TokenInterrupt,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Plain => "plain",
            Variant::Spawn => "spawn",
            Variant::SpawnBlocking => "spawn-blocking",
            Variant::Token => "token",
            Variant::TokenInterrupt => "token-interrupt",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http1 => "http1",
            Protocol::Http2 => "http2",
        }
    }
}

/// The handler's world: what it calls and where it reports.
pub struct App {
    pub variant: Variant,
    pub database: Arc<Database>,
    pub downstream_url: String,
    pub client: reqwest::Client,
    pub probe: Arc<Probe>,
    pub query_rows: i64,
}

// ANCHOR: work
/// The request's work: the downstream call and the query, side by side.
/// `token`, when given, is how the query learns the request is gone.
pub async fn work(app: Arc<App>, token: Option<CancellationToken>) {
    let call = async {
        let response = app.client.get(&app.downstream_url).send().await;
        if let Ok(response) = response {
            let _ = response.bytes().await;
        }
    };
    let probe = Arc::clone(&app.probe);
    let stop = Stop {
        deadline: None,
        token,
    };
    let query = app
        .database
        .slow_query(0, app.query_rows, stop, move |end| {
            probe.mark(|marks, now| {
                marks.query_end_ms = Some(now);
                marks.query_end = Some(end);
            })
        });
    let _ = tokio::join!(call, query);
}
// ANCHOR_END: work

// ANCHOR: variants
async fn handler(State(app): State<Arc<App>>) -> &'static str {
    match app.variant {
        // hyper drops this future when the client goes away; the drop
        // reaches every `.await` inside `work`.
        Variant::Plain => work(app, None).await,
        // A spawned task belongs to the runtime, not to the request: dropping
        // the handler drops only the join handle.
        Variant::Spawn => {
            let _ = tokio::spawn(work(app, None)).await;
        }
        Variant::SpawnBlocking => {
            let runtime = tokio::runtime::Handle::current();
            let _ = tokio::task::spawn_blocking(move || runtime.block_on(work(app, None))).await;
        }
        Variant::Token | Variant::TokenInterrupt => {
            let token = CancellationToken::new();
            // Cancels the token when the handler's future is dropped.
            let _cancel_on_drop = token.clone().drop_guard();
            let for_query = (app.variant == Variant::TokenInterrupt).then(|| token.clone());
            let task = tokio::spawn(async move {
                tokio::select! {
                    _ = token.cancelled() => {}
                    _ = work(app, for_query) => {}
                }
            });
            let _ = task.await;
        }
    }
    "done"
}
// ANCHOR_END: variants

/// One case's result, in production seconds after the client left.
#[derive(Debug, Clone, Serialize)]
pub struct LeaveCase {
    pub variant: &'static str,
    pub protocol: &'static str,
    pub row: f64,
    pub downstream_after_leave_s: f64,
    pub downstream_completed: bool,
    pub query_after_leave_s: f64,
    pub query_outcome: &'static str,
    /// Both stopped within a quarter of the work they had left.
    pub work_stopped: bool,
}

/// Runs one variant over one protocol.
pub async fn leave_case(
    variant: Variant,
    protocol: Protocol,
    database: Arc<Database>,
    config: &Config,
) -> Result<LeaveCase> {
    let probe = Probe::start();
    let work_time = config.lab(config.work_s);
    let downstream = downstream::start(work_time, Arc::clone(&probe)).await?;
    let app = Arc::new(App {
        variant,
        query_rows: database.rows_for(work_time),
        database,
        downstream_url: downstream.url("/work"),
        client: reqwest::Client::new(),
        probe: Arc::clone(&probe),
    });
    let server = spawn_axum(Router::new().route("/", get(handler)).with_state(app)).await?;
    let client = match protocol {
        Protocol::Http1 => reqwest::Client::builder().http1_only(),
        Protocol::Http2 => reqwest::Client::builder().http2_prior_knowledge(),
    }
    .build()
    .context("building the client")?;
    let outcome = client
        .get(server.url("/"))
        .timeout(config.lab(config.leave_after_s))
        .send()
        .await;
    probe.mark(|marks, now| marks.client_done_ms = Some(now));
    anyhow::ensure!(outcome.is_err(), "the client got an answer before it left");
    let marks = probe
        .settle(work_time * 3, |marks| {
            marks.downstream_end_ms.is_some() && marks.query_end_ms.is_some()
        })
        .await;
    let left = marks.client_done_ms.unwrap_or(0.0);
    let downstream_after = config
        .production_ms(
            marks
                .downstream_end_ms
                .context("the downstream never ended")?
                - left,
        )
        .max(0.0);
    let query_after = config
        .production_ms(marks.query_end_ms.context("the query never ended")? - left)
        .max(0.0);
    let remaining = config.work_s - config.leave_after_s;
    server.stop(Duration::from_millis(200)).await?;
    downstream.stop(Duration::from_millis(200)).await?;
    Ok(LeaveCase {
        variant: variant.name(),
        protocol: protocol.name(),
        row: Variant::ALL
            .iter()
            .position(|each| *each == variant)
            .unwrap_or(0) as f64
            + if protocol == Protocol::Http2 {
                0.15
            } else {
                -0.15
            },
        downstream_after_leave_s: downstream_after,
        downstream_completed: marks.downstream_completed,
        query_after_leave_s: query_after,
        query_outcome: marks.query_end.map_or("none", |end| end.name()),
        work_stopped: downstream_after < remaining / 4.0 && query_after < remaining / 4.0,
    })
}
