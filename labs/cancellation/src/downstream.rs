//! The slow downstream: an axum server on 127.0.0.1 whose one route works in
//! small steps for a fixed time. A guard in its handler marks when it
//! stopped and whether it finished, so the downstream itself reports the
//! work it did after its caller left.

use std::{sync::Arc, time::Duration};

use anyhow::Result;
use axum::{Router, extract::State, routing::get};
use lab_kit::server::{RunningServer, spawn_axum};

use crate::case_log::{CaseLog, DownstreamEndGuard};

#[derive(Clone)]
struct Downstream {
    work: Duration,
    log: Arc<CaseLog>,
}

/// Starts the downstream; it answers `/work` after `work`.
pub async fn start(work: Duration, log: Arc<CaseLog>) -> Result<RunningServer> {
    let app = Router::new()
        .route("/work", get(slow_work))
        .with_state(Downstream { work, log });
    spawn_axum(app).await
}

async fn slow_work(State(downstream): State<Downstream>) -> &'static str {
    let mut guard = DownstreamEndGuard {
        log: downstream.log,
        completed: false,
    };
    let steps = 20;
    for _ in 0..steps {
        tokio::time::sleep(downstream.work / steps).await;
    }
    guard.completed = true;
    "worked"
}
