//! # Exercise: a liveness probe that asks the database
//!
//! The kubelet probes `/livez` (three failures: restart the container) and
//! `/readyz` (three failures: stop routing to the pod). Both endpoints here
//! run the same "is the database there?" query, so that a pod that cannot
//! reach the database "gets fixed". Then the database has a five-minute
//! failover, and every pod of the service restarts, over and over.
//!
//! Verify: `cargo xtask exercise verify health-checks-liveness-deps`.

use std::sync::Arc;

use axum::{Router, extract::State, http::StatusCode, routing::get};
use lab_health_checks::app::ServiceState;

/// The health endpoints the kubelet probes.
pub fn health_routes(state: Arc<ServiceState>) -> Router {
    // One check, "can we reach the database?", behind both probes.
    let healthy = get(database_answers).with_state(state);
    // TODO: liveness asks "is this process beyond saving, so restart it?",
    // readiness "should traffic come here now?". Which of the two can a
    // database outage answer, and what does a restart fix then?
    Router::new()
        .route("/livez", healthy.clone())
        .route("/readyz", healthy)
}

/// 200 while a query to the database answers in time, 503 when it fails.
async fn database_answers(State(state): State<Arc<ServiceState>>) -> StatusCode {
    state.dependency_status().await
}
