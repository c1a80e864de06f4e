//! The solution: the readiness check has a budget of its own, well under the
//! probe's 1 s timeout, whatever the query timeout of ordinary requests is.
//! A hanging database then gives a fast, explicit 503 (the pod leaves
//! rotation for a stated reason) instead of a probe timeout, and nothing is
//! left waiting once the probe has its answer.

use std::{sync::Arc, time::Duration};

use axum::{extract::State, http::StatusCode};
use lab_health_checks::app::ServiceState;

/// Under the kubelet's `timeoutSeconds: 1` with room for the round trip.
const CHECK_BUDGET: Duration = Duration::from_millis(300);

/// `GET /readyz`: 200 while the database answers within the budget.
pub async fn readyz(State(state): State<Arc<ServiceState>>) -> StatusCode {
    let request = state.client.get(&state.query_url).send();
    let Ok(answered) = tokio::time::timeout(CHECK_BUDGET, request).await else {
        return StatusCode::SERVICE_UNAVAILABLE;
    };
    if answered.is_ok_and(|response| response.status().is_success()) {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}
