//! The solution: the two probes answer two questions. Liveness answers from
//! the process alone (if this handler runs, the runtime is alive), so a
//! database outage cannot restart anything; readiness asks the database, so
//! the pod leaves rotation while it cannot serve and comes back after.

use std::sync::Arc;

use axum::{Router, extract::State, http::StatusCode, routing::get};
use lab_health_checks::app::ServiceState;

/// The health endpoints the kubelet probes.
pub fn health_routes(state: Arc<ServiceState>) -> Router {
    // Readiness needs the database; liveness needs nothing but this process.
    let readiness = Router::new().route("/readyz", get(can_serve));
    let liveness = get(|| async { StatusCode::OK });
    readiness.with_state(state).route("/livez", liveness)
}

/// Ready while a query to the database answers.
async fn can_serve(State(state): State<Arc<ServiceState>>) -> StatusCode {
    state.dependency_status().await
}
