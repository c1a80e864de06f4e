//! # Exercise: a readiness check slower than its probe
//!
//! The kubelet probes `/readyz` with a 1 s timeout (Kubernetes' default
//! `timeoutSeconds`). The handler asks the database with the service's
//! ordinary query timeout, 30 s. When the database hangs, the probe gives
//! up long before the handler does: no 503, no reason, just timeouts, and a
//! handler and a database connection left waiting for every probe.
//!
//! Verify: `cargo xtask exercise verify health-checks-probe-timeout`.

use std::sync::Arc;

use axum::{extract::State, http::StatusCode};
use lab_health_checks::app::ServiceState;

/// `GET /readyz`: 200 while the database answers, 503 when it does not.
pub async fn readyz(State(state): State<Arc<ServiceState>>) -> StatusCode {
    // TODO: the kubelet waits 1 s for this answer. How long may this check
    // wait for the database, and what should it answer when that runs out?
    let limit = state.query_limit; // 30 s, for every query of the service
    let query = state.client.get(&state.query_url).timeout(limit).send();
    match query.await.map(|answer| answer.status().is_success()) {
        Ok(true) => StatusCode::OK,
        Ok(false) | Err(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}
