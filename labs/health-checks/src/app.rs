//! The service the probes watch: an axum app with the two health endpoints
//! the chapter is about. `/livez` answers from the process; `/readyz` runs a
//! query against the dependency, as a `SELECT 1` health check does. The lab
//! points a liveness probe at each, and the readiness probe at `/readyz`.

use std::{sync::Arc, time::Duration};

use anyhow::{Context, Result};
use axum::{
    Router,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::get,
};

/// What the handlers share: the way to the dependency.
pub struct ServiceState {
    pub query_url: String,
    pub client: reqwest::Client,
    /// A bound on a query, so a dependency that hangs cannot hold a handler
    /// forever; well above a slow query, so the probe's timeout decides.
    pub query_limit: Duration,
}

impl ServiceState {
    pub fn new(query_url: String, query_limit: Duration) -> Result<ServiceState> {
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .context("building the dependency client")?;
        Ok(ServiceState {
            query_url,
            client,
            query_limit,
        })
    }
}

// ANCHOR: routes
/// Liveness answers from the process; readiness asks the dependency.
pub fn app(state: Arc<ServiceState>) -> Router {
    Router::new()
        .route("/livez", get(|| async { "alive\n" }))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// 200 when a query to the dependency answers, 503 when it fails. No timeout
/// of its own below the probe's: a slow query makes a slow probe.
async fn readyz(State(state): State<Arc<ServiceState>>) -> Response {
    let status = state.dependency_status().await;
    let body = if status.is_success() {
        "ready\n"
    } else {
        "dependency failed\n"
    };
    (status, body).into_response()
}

impl ServiceState {
    /// 200 when a query to the dependency answers with a success within
    /// `query_limit`, 503 when it fails or takes longer.
    pub async fn dependency_status(&self) -> StatusCode {
        let query = self.client.get(&self.query_url).timeout(self.query_limit);
        match query.send().await {
            Ok(response) if response.status().is_success() => StatusCode::OK,
            _ => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}
// ANCHOR_END: routes
