//! Does the work stop when the client leaves? A client sends one request and
//! gives up after a short time (reqwest's per-request timeout drops the
//! request future: over HTTP/1.1 that closes the connection, over HTTP/2 it
//! resets the stream). The handler, in five variants, calls a slow
//! downstream and runs a slow query side by side; the downstream and the
//! database mark when they stopped.

use std::{sync::Arc, time::Duration};

use anyhow::{Context, Result};
use axum::{Router, extract::State, routing::get};
use lab_kit::{Series, server::spawn_axum};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::{
    Config,
    case_log::CaseLog,
    db::{QueryStop, SlowDatabase},
    downstream,
};

lab_kit::series! {
    /// How the handler runs its work.
    pub enum LeaveVariant {
        /// Awaits the downstream and the query in the handler's own future.
        Plain => "plain",
        /// Moves the work into `tokio::spawn` and awaits the join handle.
        Spawn => "spawn",
        /// Runs the work on the blocking pool (`spawn_blocking` + `block_on`).
        SpawnBlocking => "spawn-blocking",
        /// Spawns the work, but a `CancellationToken` tied to the request (a
        /// drop guard in the handler) stops the spawned task.
        Token => "token",
        /// The same, with the token also handed to the query.
        TokenInterrupt => "token-interrupt",
    }
}

lab_kit::series! {
    pub enum LeaveProtocol {
        Http1 => "http1",
        Http2 => "http2",
    }
}

/// What part 1 compares: one way to run the handler's work, over one protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaveSetup {
    pub variant: LeaveVariant,
    pub protocol: LeaveProtocol,
}

impl LeaveSetup {
    /// Every variant over HTTP/1.1, then every variant over HTTP/2.
    pub fn all() -> Vec<LeaveSetup> {
        LeaveProtocol::ALL
            .into_iter()
            .flat_map(|protocol| {
                LeaveVariant::ALL
                    .into_iter()
                    .map(move |variant| LeaveSetup { variant, protocol })
            })
            .collect()
    }
}

impl Series for LeaveSetup {
    fn series(&self) -> String {
        format!("leave/{}/{}", self.variant.name(), self.protocol.name())
    }
}

/// The handler's world: what it calls and where it reports.
pub struct LeaveApp {
    pub variant: LeaveVariant,
    pub database: Arc<SlowDatabase>,
    pub downstream_url: String,
    pub client: reqwest::Client,
    pub log: Arc<CaseLog>,
    pub query_rows: i64,
}

// ANCHOR: work
/// The request's work: the downstream call and the query, side by side.
/// `token`, when given, is how the query learns the request is gone.
pub async fn work(app: Arc<LeaveApp>, token: Option<CancellationToken>) {
    let call = async {
        let response = app.client.get(&app.downstream_url).send().await;
        if let Ok(response) = response {
            let _ = response.bytes().await;
        }
    };
    let log = Arc::clone(&app.log);
    let stop = QueryStop {
        deadline: None,
        token,
    };
    let query = app
        .database
        .slow_query(0, app.query_rows, stop, move |end, _began| {
            log.mark(|marks, now| {
                marks.query_end_ms = Some(now);
                marks.query_end = Some(end);
            })
        });
    let _ = tokio::join!(call, query);
}
// ANCHOR_END: work

// ANCHOR: variants
async fn handler(State(app): State<Arc<LeaveApp>>) -> &'static str {
    match app.variant {
        // hyper drops this future when the client goes away; the drop
        // reaches every `.await` inside `work`.
        LeaveVariant::Plain => work(app, None).await,
        // A spawned task belongs to the runtime, not to the request: dropping
        // the handler drops only the join handle.
        LeaveVariant::Spawn => {
            let _ = tokio::spawn(work(app, None)).await;
        }
        LeaveVariant::SpawnBlocking => {
            let runtime = tokio::runtime::Handle::current();
            let _ = tokio::task::spawn_blocking(move || runtime.block_on(work(app, None))).await;
        }
        LeaveVariant::Token | LeaveVariant::TokenInterrupt => {
            let token = CancellationToken::new();
            // Cancels the token when the handler's future is dropped.
            let _cancel_on_drop = token.clone().drop_guard();
            let for_query = (app.variant == LeaveVariant::TokenInterrupt).then(|| token.clone());
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
    pub downstream_after_leave_s: f64,
    pub downstream_completed: bool,
    pub query_after_leave_s: f64,
    pub query_outcome: &'static str,
    /// Both stopped within a quarter of the work they had left.
    pub work_stopped: bool,
}

/// Runs one variant over one protocol.
pub async fn leave_case(
    setup: LeaveSetup,
    database: Arc<SlowDatabase>,
    config: &Config,
) -> Result<LeaveCase> {
    let LeaveSetup { variant, protocol } = setup;
    let log = CaseLog::start();
    let work_time = config.lab(config.work_s);
    let downstream = downstream::start(work_time, Arc::clone(&log)).await?;
    let app = Arc::new(LeaveApp {
        variant,
        query_rows: database.rows_for(work_time),
        database,
        downstream_url: downstream.url("/work"),
        client: reqwest::Client::new(),
        log: Arc::clone(&log),
    });
    let server = spawn_axum(Router::new().route("/", get(handler)).with_state(app)).await?;
    let client = match protocol {
        LeaveProtocol::Http1 => reqwest::Client::builder().http1_only(),
        LeaveProtocol::Http2 => reqwest::Client::builder().http2_prior_knowledge(),
    }
    .build()
    .context("building the client")?;
    let outcome = client
        .get(server.url("/"))
        .timeout(config.lab(config.leave_after_s))
        .send()
        .await;
    log.mark(|marks, now| marks.client_done_ms = Some(now));
    anyhow::ensure!(outcome.is_err(), "the client got an answer before it left");
    let marks = log
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
        downstream_after_leave_s: downstream_after,
        downstream_completed: marks.downstream_completed,
        query_after_leave_s: query_after,
        query_outcome: marks.query_end.map_or("none", |end| end.name()),
        work_stopped: downstream_after < remaining / 4.0 && query_after < remaining / 4.0,
    })
}
