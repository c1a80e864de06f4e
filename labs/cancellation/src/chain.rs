//! Deadline propagation across three services: edge → middle → backend. The
//! edge has a route timeout; the middle does some work of its own, then calls
//! the backend, which runs a SQLite query on a small pool. A burst of users
//! arrives at once, so queries queue. Two variants: every hop with its own
//! fixed, generous timeouts; and every hop passing the remaining budget on in
//! a `grpc-timeout` header, refusing work whose deadline has passed, and
//! setting its outbound timeout (and the query's) to the budget minus a margin.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use axum::{
    Router,
    extract::State,
    http::{HeaderMap, StatusCode},
    routing::get,
};
use lab_kit::server::spawn_axum;
use serde::Serialize;
use tokio::task::JoinSet;
use tower_http::timeout::TimeoutLayer;

use crate::{
    Config,
    db::{QueryEnd, QueryStop, SlowDatabase},
    grpc_timeout,
};

lab_kit::series! {
    /// What part 4 compares.
    pub enum ChainVariant in "chain" {
        /// Each hop has its own 30 s outbound and query timeouts.
        FixedTimeouts => "fixed-timeouts",
        /// Each hop passes `grpc-timeout` on and works within it.
        PropagatedDeadline => "propagated-deadline",
    }
}

/// One hop's view of the request's deadline.
#[derive(Clone)]
struct Hop {
    variant: ChainVariant,
    fixed_timeout: Duration,
    margin: Duration,
    refused: Arc<Mutex<u64>>,
}

// ANCHOR: budget
impl Hop {
    /// The instant this request's work must end by, from the caller's
    /// `grpc-timeout` (a relative budget: no clock shared between hosts is
    /// needed), or the hop's own fixed timeout when nothing is propagated.
    fn deadline(&self, arrived: Instant, headers: &HeaderMap) -> Instant {
        let propagated = headers
            .get(grpc_timeout::HEADER)
            .and_then(|value| grpc_timeout::parse(value.to_str().ok()?));
        match (self.variant, propagated) {
            (ChainVariant::PropagatedDeadline, Some(budget)) => arrived + budget,
            _ => arrived + self.fixed_timeout,
        }
    }

    /// The timeout and header for the next call: what is left, minus a
    /// margin for the answer to travel back. `None`: nothing is left, refuse.
    fn outbound(&self, deadline: Instant) -> Option<(Duration, Option<String>)> {
        match self.variant {
            ChainVariant::FixedTimeouts => Some((self.fixed_timeout, None)),
            ChainVariant::PropagatedDeadline => {
                let left = deadline
                    .checked_duration_since(Instant::now())?
                    .checked_sub(self.margin)
                    .filter(|left| !left.is_zero());
                match left {
                    Some(left) => Some((left, Some(grpc_timeout::encode(left)))),
                    None => {
                        *self.refused.lock().expect("not poisoned") += 1;
                        None
                    }
                }
            }
        }
    }
}
// ANCHOR_END: budget

impl Hop {
    /// A request that arrives now: its deadline, and the id the edge gave it
    /// (0 without one).
    fn arrival(&self, headers: &HeaderMap) -> (Instant, u64) {
        let id = headers
            .get("x-request-id")
            .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
            .unwrap_or(0);
        (self.deadline(Instant::now(), headers), id)
    }
}

#[derive(Clone)]
struct Forwarder {
    hop: Hop,
    next: String,
    client: reqwest::Client,
    work_first: Duration,
}

/// The edge and the middle: work of their own, then the next hop.
async fn forward(State(forwarder): State<Forwarder>, headers: HeaderMap) -> StatusCode {
    let (deadline, id) = forwarder.hop.arrival(&headers);
    tokio::time::sleep(forwarder.work_first).await;
    let Some((timeout, budget)) = forwarder.hop.outbound(deadline) else {
        return StatusCode::GATEWAY_TIMEOUT;
    };
    let mut request = forwarder
        .client
        .get(&forwarder.next)
        .timeout(timeout)
        .header("x-request-id", id);
    if let Some(budget) = budget {
        request = request.header(grpc_timeout::HEADER, budget);
    }
    match request.send().await {
        Ok(response) => response.status(),
        Err(_) => StatusCode::GATEWAY_TIMEOUT,
    }
}

#[derive(Clone)]
struct Backend {
    hop: Hop,
    database: Arc<SlowDatabase>,
    rows: i64,
    /// When each query ended, by request id.
    ended: Arc<Mutex<Vec<(u64, Instant, Instant)>>>,
}

async fn backend(State(backend): State<Backend>, headers: HeaderMap) -> StatusCode {
    let (deadline, id) = backend.hop.arrival(&headers);
    if backend.hop.outbound(deadline).is_none() {
        return StatusCode::GATEWAY_TIMEOUT;
    }
    let ended = Arc::clone(&backend.ended);
    let refused = Arc::clone(&backend.hop.refused);
    let stop = QueryStop {
        deadline: Some(deadline),
        token: None,
    };
    let outcome = backend
        .database
        .slow_query(id, backend.rows, stop, move |end, began| {
            if end == QueryEnd::NotStarted {
                *refused.lock().expect("not poisoned") += 1;
            } else {
                ended
                    .lock()
                    .expect("not poisoned")
                    .push((id, began, Instant::now()));
            }
        })
        .await;
    match outcome {
        Ok(QueryEnd::Completed) => StatusCode::OK,
        _ => StatusCode::GATEWAY_TIMEOUT,
    }
}

/// What one variant did after the edge's deadline, in production seconds.
#[derive(Debug, Clone, Serialize)]
pub struct ChainOutcome {
    pub variant: &'static str,
    pub users: u64,
    pub answered_200: u64,
    pub queries_run: u64,
    /// Query-seconds the backend spent after the edge had given up.
    pub query_s_after_deadline: f64,
    pub longest_query_after_deadline_s: f64,
    /// Requests a hop refused because their budget was spent.
    pub refused: u64,
}

pub async fn chain_case(variant: ChainVariant, config: &Config) -> Result<ChainOutcome> {
    let database = Arc::new(SlowDatabase::open(config.chain_pool).context("opening the database")?);
    let refused = Arc::new(Mutex::new(0));
    let hop = Hop {
        variant,
        fixed_timeout: config.lab(config.query_timeout_s),
        margin: config.lab(config.chain_margin_s),
        refused: Arc::clone(&refused),
    };
    let ended = Arc::default();
    let back = Backend {
        hop: hop.clone(),
        rows: database.rows_for(config.lab(config.chain_query_s)),
        database: Arc::clone(&database),
        ended: Arc::clone(&ended),
    };
    let backend_server =
        spawn_axum(Router::new().route("/", get(backend)).with_state(back)).await?;
    let middle = Forwarder {
        hop: hop.clone(),
        next: backend_server.url("/"),
        client: reqwest::Client::new(),
        work_first: config.lab(config.chain_middle_work_s),
    };
    let middle_server =
        spawn_axum(Router::new().route("/", get(forward)).with_state(middle)).await?;
    let budget = config.lab(config.route_timeout_s);
    let edge = Forwarder {
        hop: Hop {
            // The edge starts the budget: its route timeout.
            fixed_timeout: if variant == ChainVariant::PropagatedDeadline {
                budget
            } else {
                hop.fixed_timeout
            },
            ..hop.clone()
        },
        next: middle_server.url("/"),
        client: reqwest::Client::new(),
        work_first: Duration::ZERO,
    };
    let edge_app = Router::new()
        .route("/", get(forward))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::GATEWAY_TIMEOUT,
            budget,
        ))
        .with_state(edge);
    let edge_server = spawn_axum(edge_app).await?;
    let client = reqwest::Client::new();
    let started = Instant::now();
    let edge_deadline = started + budget;
    let mut users = JoinSet::new();
    for id in 1..=config.chain_users {
        let request = client
            .get(edge_server.url("/"))
            .header("x-request-id", id)
            .timeout(budget * 2);
        users.spawn(async move {
            request
                .send()
                .await
                .is_ok_and(|response| response.status() == StatusCode::OK)
        });
    }
    let mut answered = 0;
    while let Some(joined) = users.join_next().await {
        answered += u64::from(joined.context("a user task panicked")?);
    }
    // Let the queries the edge gave up on end on their own (bounded).
    let until = Instant::now() + config.lab(config.query_timeout_s * 2.0);
    while !database.running().is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    edge_server.stop(Duration::from_millis(200)).await?;
    middle_server.stop(Duration::from_millis(200)).await?;
    backend_server.stop(Duration::from_millis(200)).await?;
    let ended = ended.lock().expect("not poisoned").clone();
    let after: Vec<f64> = ended
        .iter()
        .map(|(_, began, end)| {
            let from = (*began).max(edge_deadline);
            config.production_ms(end.saturating_duration_since(from).as_secs_f64() * 1000.0)
        })
        .collect();
    let refused = *refused.lock().expect("not poisoned");
    Ok(ChainOutcome {
        variant: variant.name(),
        users: config.chain_users,
        answered_200: answered,
        queries_run: ended.len() as u64,
        query_s_after_deadline: after.iter().sum(),
        longest_query_after_deadline_s: after.iter().copied().fold(0.0, f64::max),
        refused,
    })
}
