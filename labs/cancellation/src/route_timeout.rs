//! A route timeout, done naively and done right. The route must answer
//! within its timeout; its work (downstream call and query side by side,
//! then an order placed in the database) takes longer. Three ways to time
//! it out, and what each leaves running after the answer has gone out.

use std::{sync::Arc, time::Duration};

use anyhow::{Context, Result};
use axum::{Router, extract::State, http::StatusCode, routing::get};
use lab_kit::{net::send_raw_get, server::spawn_axum};
use serde::Serialize;
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;
use tower_http::timeout::TimeoutLayer;

use crate::{
    Config,
    case_log::CaseLog,
    db::SlowDatabase,
    downstream,
    leave::{self, LeaveApp, LeaveVariant},
};

lab_kit::series! {
    pub enum RouteTimeout in "route" {
        /// The work in `tokio::spawn`, raced against a timer; the timer's side
        /// answers 503 and walks away from the task.
        SpawnedRace => "spawned-race",
        /// `tower_http::timeout::TimeoutLayer` (503) around a handler that
        /// awaits its work in place.
        TowerLayer => "tower-timeout",
        /// The same layer, and a token dropped with the handler that the query
        /// watches.
        TowerLayerToken => "tower-timeout-token",
    }
}

/// The work, then the order that the work was for.
async fn work_then_order(app: Arc<LeaveApp>, token: Option<CancellationToken>) {
    leave::work(Arc::clone(&app), token).await;
    if app.database.place_order(1).await.is_ok() {
        app.log.mark(|marks, now| marks.order_ms = Some(now));
    }
}

struct Route {
    app: Arc<LeaveApp>,
    timeout: Duration,
}

// ANCHOR: naive
/// The naive timeout: the response is decided by a race, and the loser of
/// the race (the spawned work) is not told.
async fn spawned_race(State(route): State<Arc<Route>>) -> (StatusCode, &'static str) {
    let task = tokio::spawn(work_then_order(Arc::clone(&route.app), None));
    match tokio::time::timeout(route.timeout, task).await {
        Ok(_) => (StatusCode::OK, "order placed"),
        // The join handle is dropped here; the task runs on.
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "timed out"),
    }
}
// ANCHOR_END: naive

// ANCHOR: right
/// Awaited in place: when `TimeoutLayer` answers 503 it drops this future,
/// and with it the guard that cancels the token the query watches.
async fn in_place(State(route): State<Arc<Route>>) -> (StatusCode, &'static str) {
    let token = CancellationToken::new();
    let _cancel_on_drop = token.clone().drop_guard();
    let for_query = (route.app.variant == LeaveVariant::TokenInterrupt).then_some(token);
    work_then_order(Arc::clone(&route.app), for_query).await;
    (StatusCode::OK, "order placed")
}

fn router(kind: RouteTimeout, route: Arc<Route>) -> Router {
    let timeout = route.timeout;
    match kind {
        RouteTimeout::SpawnedRace => Router::new().route("/order", get(spawned_race)),
        RouteTimeout::TowerLayer | RouteTimeout::TowerLayerToken => Router::new()
            .route("/order", get(in_place))
            .layer(TimeoutLayer::with_status_code(
                StatusCode::SERVICE_UNAVAILABLE,
                timeout,
            )),
    }
    .with_state(route)
}
// ANCHOR_END: right

/// What the client received and what ran on after it.
#[derive(Debug, Clone, Serialize)]
pub struct RouteCase {
    pub timeout: &'static str,
    pub status: u16,
    /// Status lines the client read on its connection.
    pub responses: u64,
    pub answered_s: f64,
    pub downstream_after_answer_s: f64,
    pub downstream_completed: bool,
    pub query_after_answer_s: f64,
    pub query_outcome: &'static str,
    /// Orders placed for a request that was told 503.
    pub orders_after_503: i64,
}

pub async fn route_case(
    kind: RouteTimeout,
    database: Arc<SlowDatabase>,
    config: &Config,
) -> Result<RouteCase> {
    let log = CaseLog::start();
    let work_time = config.lab(config.work_s);
    let orders_before = database.orders_for(1).await?;
    let downstream = downstream::start(work_time, Arc::clone(&log)).await?;
    let variant = match kind {
        RouteTimeout::TowerLayerToken => LeaveVariant::TokenInterrupt,
        RouteTimeout::SpawnedRace | RouteTimeout::TowerLayer => LeaveVariant::Plain,
    };
    let app = Arc::new(LeaveApp {
        variant,
        // Twice the downstream's time: well past the route's timeout even
        // on a run where SQLite is faster than when it was timed.
        query_rows: database.rows_for(work_time * 2),
        database: Arc::clone(&database),
        downstream_url: downstream.url("/work"),
        client: reqwest::Client::new(),
        log: Arc::clone(&log),
    });
    let route = Arc::new(Route {
        app,
        timeout: config.lab(config.route_timeout_s),
    });
    let server = spawn_axum(router(kind, route)).await?;
    // A raw client, so every byte the server sends is seen: one request,
    // then read to the end of the connection.
    let mut stream = send_raw_get(server.addr, "/order").await?;
    let mut received = Vec::new();
    let read = tokio::time::timeout(work_time * 3, stream.read_to_end(&mut received)).await;
    log.mark(|marks, now| marks.client_done_ms = Some(now));
    read.context("the server never closed")?
        .context("reading")?;
    let text = String::from_utf8_lossy(&received);
    let status = text
        .get(9..12)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let marks = log
        .settle(work_time * 3, |marks| {
            marks.downstream_end_ms.is_some() && marks.query_end_ms.is_some()
        })
        .await;
    // Give a detached order a moment to land before counting.
    tokio::time::sleep(config.lab(config.work_s / 4.0)).await;
    let orders = database.orders_for(1).await? - orders_before;
    let answered = marks.client_done_ms.unwrap_or(0.0);
    server.stop(Duration::from_millis(200)).await?;
    downstream.stop(Duration::from_millis(200)).await?;
    Ok(RouteCase {
        timeout: kind.name(),
        status,
        responses: text.matches("HTTP/1.1 ").count() as u64,
        answered_s: config.production_ms(answered),
        downstream_after_answer_s: config
            .production_ms(
                marks
                    .downstream_end_ms
                    .context("the downstream never ended")?
                    - answered,
            )
            .max(0.0),
        downstream_completed: marks.downstream_completed,
        query_after_answer_s: config
            .production_ms(marks.query_end_ms.context("the query never ended")? - answered)
            .max(0.0),
        query_outcome: marks.query_end.map_or("none", |end| end.name()),
        orders_after_503: if status == 503 { orders } else { 0 },
    })
}
