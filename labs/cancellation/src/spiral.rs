//! The spiral: more load than a pool of SQLite connections can serve, with a
//! heavy query now and then. Users give up after a while; the route answers
//! 503 at its timeout. Three variants differ only in what stops a query:
//! a query timeout longer than the route's, a query timeout at the request's
//! remaining deadline, and that deadline plus the request's cancellation
//! (a token cancelled when hyper drops the handler). A sampler counts the
//! queries running in SQLite, the users still waiting, and the queries
//! running for a user who has left.

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use axum::{Router, extract::State, http::HeaderMap, http::StatusCode, routing::get};
use lab_kit::{Output, Series, server::spawn_axum};
use serde::Serialize;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower_http::timeout::TimeoutLayer;

use crate::{
    Config,
    db::{QueryEnd, QueryStop, SlowDatabase},
};

lab_kit::series! {
    pub enum SpiralVariant in "spiral" {
        LongQueryTimeout => "long-query-timeout",
        QueryTimeoutBelowDeadline => "query-timeout-below-deadline",
        Propagated => "propagated",
    }
}

struct Service {
    variant: SpiralVariant,
    database: SlowDatabase,
    route_timeout: Duration,
    query_timeout: Duration,
    margin: Duration,
    light_rows: i64,
    heavy_rows: i64,
}

// ANCHOR: handler
async fn query_route(State(service): State<Arc<Service>>, headers: HeaderMap) -> StatusCode {
    let arrived = Instant::now();
    let header = |name: &str| -> u64 {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok()?.parse().ok())
            .unwrap_or(0)
    };
    let rows = if header("x-heavy") == 1 {
        service.heavy_rows
    } else {
        service.light_rows
    };
    // Cancelled when this future is dropped: by hyper when the user leaves,
    // or by the timeout layer when it answers 503.
    let token = CancellationToken::new();
    let _cancel_on_drop = token.clone().drop_guard();
    let deadline = arrived + service.route_timeout - service.margin;
    let stop = match service.variant {
        SpiralVariant::LongQueryTimeout => QueryStop {
            deadline: Some(arrived + service.query_timeout),
            token: None,
        },
        SpiralVariant::QueryTimeoutBelowDeadline => QueryStop {
            deadline: Some(deadline),
            token: None,
        },
        SpiralVariant::Propagated => QueryStop {
            deadline: Some(deadline),
            token: Some(token),
        },
    };
    match service
        .database
        .slow_query(header("x-request-id"), rows, stop, |_, _| {})
        .await
    {
        Ok(QueryEnd::Completed) => StatusCode::OK,
        Ok(QueryEnd::Interrupted | QueryEnd::NotStarted) => StatusCode::GATEWAY_TIMEOUT,
        Ok(QueryEnd::Failed) | Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
// ANCHOR_END: handler

/// One sample of the spiral, production seconds since the load started.
#[derive(Debug, Clone, Serialize)]
pub struct SpiralSample {
    pub t_s: f64,
    pub running: u64,
    pub waiting: u64,
    /// Queries running whose user has left.
    pub for_nobody: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SpiralSummary {
    pub variant: &'static str,
    pub pool_size: u64,
    pub offered: u64,
    pub answered_in_time: u64,
    pub goodput_pct: f64,
    pub max_running: u64,
    pub max_waiting: u64,
    pub max_for_nobody: u64,
    /// Sum over samples of queries running for nobody, times the sample
    /// interval: query-seconds of work nobody received (production).
    pub query_s_for_nobody: f64,
    /// Samples in which more queries ran than users waited.
    pub samples_running_above_waiting: u64,
    /// The slow query's speed on this machine, timed once for the three
    /// variants: rows a millisecond, from which the light and heavy queries
    /// are sized.
    pub rows_per_ms: f64,
}

pub async fn run_spiral(config: &Config, out: &mut Output) -> Result<()> {
    // One timing of the slow query for the three variants, so that they run
    // the same queries and differ only in what stops one.
    let rows_per_ms = SlowDatabase::open(1)
        .context("timing the slow query")?
        .rows_per_ms;
    for variant in SpiralVariant::ALL {
        let (samples, summary) = spiral_variant(variant, config, rows_per_ms)
            .await
            .with_context(|| variant.name())?;
        for sample in &samples {
            out.write_sample(&variant.series(), sample)?;
        }
        out.write_summary(&variant.series(), &summary)?;
    }
    Ok(())
}

/// One variant, its queries sized from `rows_per_ms` (see [`run_spiral`]).
pub async fn spiral_variant(
    variant: SpiralVariant,
    config: &Config,
    rows_per_ms: f64,
) -> Result<(Vec<SpiralSample>, SpiralSummary)> {
    let service = spiral_service(variant, config, rows_per_ms)?;
    let app = Router::new()
        .route("/query", get(query_route))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            config.lab(config.route_timeout_s),
        ))
        .with_state(Arc::clone(&service));
    let server = spawn_axum(app).await?;
    let client = reqwest::Client::new();
    let waiting: Arc<Mutex<BTreeSet<u64>>> = Arc::default();
    let url = server.url("/query");
    let started = Instant::now();
    let duration = config.lab(config.spiral_duration_s);
    let every = config.lab(1.0 / config.arrivals_per_s);
    let patience = config.lab(config.user_patience_s);
    let mut users = JoinSet::new();
    let mut samples = Vec::new();
    let mut next_arrival = started;
    let mut next_sample = started;
    let mut request_id = 0_u64;
    // One loop drives arrivals and samples, so neither drifts.
    while started.elapsed() < duration + patience {
        let now = Instant::now();
        if now >= next_arrival && started.elapsed() < duration {
            request_id += 1;
            let heavy = request_id.is_multiple_of(config.heavy_every);
            waiting.lock().expect("not poisoned").insert(request_id);
            let (client, url, waiting, id) = (
                client.clone(),
                url.clone(),
                Arc::clone(&waiting),
                request_id,
            );
            users.spawn(async move {
                let answer = client
                    .get(&url)
                    .header("x-request-id", id)
                    .header("x-heavy", u64::from(heavy))
                    .timeout(patience)
                    .send()
                    .await;
                waiting.lock().expect("not poisoned").remove(&id);
                matches!(answer, Ok(response) if response.status() == StatusCode::OK)
            });
            next_arrival += every;
        }
        if now >= next_sample {
            let running = service.database.running();
            let waiting_now = waiting.lock().expect("not poisoned").clone();
            samples.push(SpiralSample {
                t_s: config.production_ms(started.elapsed().as_secs_f64() * 1000.0),
                running: running.len() as u64,
                waiting: waiting_now.len() as u64,
                for_nobody: running.difference(&waiting_now).count() as u64,
            });
            next_sample += config.lab(config.sample_every_s);
        }
        let wake = next_arrival.min(next_sample);
        tokio::time::sleep_until(wake.into()).await;
    }
    let mut answered_in_time = 0;
    while let Some(user) = users.join_next().await {
        answered_in_time += u64::from(user.unwrap_or(false));
    }
    // Let queries that nobody waits for end before the next variant.
    let until = Instant::now() + config.lab(config.query_timeout_s * 2.0);
    while !service.database.running().is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.stop(Duration::from_millis(200)).await?;
    let summary = spiral_summary(
        variant,
        config,
        request_id,
        answered_in_time,
        &samples,
        rows_per_ms,
    );
    Ok((samples, summary))
}

/// The variant's service: its database, with the light and heavy queries
/// sized from `rows_per_ms`, and the timeouts in lab time.
fn spiral_service(
    variant: SpiralVariant,
    config: &Config,
    rows_per_ms: f64,
) -> Result<Arc<Service>> {
    let database = SlowDatabase::open_at(config.pool_size, Some(rows_per_ms))
        .context("opening the database")?;
    Ok(Arc::new(Service {
        variant,
        light_rows: database.rows_for(config.lab(config.light_query_s)),
        heavy_rows: database.rows_for(config.lab(config.heavy_query_s)),
        database,
        route_timeout: config.lab(config.route_timeout_s),
        query_timeout: config.lab(config.query_timeout_s),
        margin: config.lab(0.5),
    }))
}

/// What the variant's run came to: users offered and answered in time, and
/// the sampler's peaks and sums.
fn spiral_summary(
    variant: SpiralVariant,
    config: &Config,
    offered: u64,
    answered_in_time: u64,
    samples: &[SpiralSample],
    rows_per_ms: f64,
) -> SpiralSummary {
    SpiralSummary {
        variant: variant.name(),
        pool_size: config.pool_size as u64,
        offered,
        answered_in_time,
        goodput_pct: answered_in_time as f64 * 100.0 / offered.max(1) as f64,
        max_running: samples
            .iter()
            .map(|sample| sample.running)
            .max()
            .unwrap_or(0),
        max_waiting: samples
            .iter()
            .map(|sample| sample.waiting)
            .max()
            .unwrap_or(0),
        max_for_nobody: samples
            .iter()
            .map(|sample| sample.for_nobody)
            .max()
            .unwrap_or(0),
        query_s_for_nobody: samples
            .iter()
            .map(|sample| sample.for_nobody as f64)
            .sum::<f64>()
            * config.sample_every_s,
        samples_running_above_waiting: samples
            .iter()
            .filter(|sample| sample.running > sample.waiting)
            .count() as u64,
        rows_per_ms,
    }
}
