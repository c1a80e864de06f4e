//! The check: serves a work route on 127.0.0.1 (the doctor's hardened
//! pool: 4 slots of 100 ms, at most 4 callers waiting) that answers with
//! the piece's refusal when the pool sheds, and runs the doctor's own
//! overload check on it: a ramp of closed-loop callers, 4, then 16 at a
//! time, each giving up after 1 s. From the same ramp the doctor grades the
//! Retry-After of every 503 it got; both findings must pass.

use std::{process::ExitCode, sync::Arc, time::Duration};

use anyhow::{Context, Result};
use axum::{
    Router,
    extract::State,
    response::{IntoResponse, Response},
    routing::get,
};
use exercise_kit::{Variant, Verdict};
use lab_doctor::{
    Finding, Grade,
    checks::{Patient, load::overload},
    services::{POOL_SLOTS, QUEUE_LIMIT, WorkPool},
};

exercise_kit::exercise!(
    "Retry-After is delay-seconds (a whole number of seconds, in digits, like 2) or an HTTP \
     date, nothing else: round the wait up to whole seconds, at least 1, and send the number \
     (HeaderValue::from(seconds))",
);

const LOAD_PATH: &str = "/work";
const MAX_IN_FLIGHT: &str = "16";
const CALLER_TIMEOUT: &str = "1s";
/// When a refused caller should come back: the backlog has cleared by then.
const COME_BACK_IN: Duration = Duration::from_millis(1500);

type Refusal = fn(Duration) -> Response;

/// `GET /work`: a slot, or the piece's refusal when the pool sheds.
async fn work(State((pool, refusal)): State<(Arc<WorkPool>, Refusal)>) -> Response {
    match pool.work().await {
        Ok(()) => "done\n".into_response(),
        Err(_shed) => refusal(COME_BACK_IN),
    }
}

/// The finding, as one clause: "FAIL, Retry-After: \"1.5s\" (why)".
fn said(finding: &Finding) -> String {
    format!(
        "{}, {} ({})",
        finding.grade.label(),
        finding.measured,
        finding.why
    )
}

async fn check(variant: Variant) -> Result<Verdict> {
    let refusal: Refusal = match variant {
        Variant::Yours => doctor_retry_after::refusal,
        Variant::Solution => solution::refusal,
    };
    let pool = Arc::new(WorkPool::new(Some(QUEUE_LIMIT)));
    let app = Router::new()
        .route("/", get(|| async { "ok\n" }))
        .route(LOAD_PATH, get(work))
        .with_state((pool, refusal));
    let server = lab_kit::server::spawn_axum(app).await?;
    let addr = server.addr;
    let arguments: Vec<String> = [
        &addr.to_string(),
        "overload",
        "retry-after",
        "--load-path",
        LOAD_PATH,
        "--max-in-flight",
        MAX_IN_FLIGHT,
        "--caller-timeout",
        CALLER_TIMEOUT,
    ]
    .iter()
    .map(|word| word.to_string())
    .collect();
    let options = lab_doctor::options::parse(&arguments).context("the doctor's options")?;
    let probe = Patient::plain(addr, options);
    let (shedding, retry_after) = overload(&probe).await?;
    drop(server);

    if shedding.grade != Grade::Pass {
        return Ok(Verdict::fail(format!(
            "the doctor's overload check on GET {LOAD_PATH} (up to {MAX_IN_FLIGHT} callers at \
             once, giving up after {CALLER_TIMEOUT}) said {}: the route must still shed what its \
             {} slots and {} waiters cannot take, at once (its Retry-After: {})",
            said(&shedding),
            POOL_SLOTS,
            QUEUE_LIMIT,
            said(&retry_after)
        )));
    }
    Ok(match retry_after.grade {
        Grade::Pass => Verdict::pass(format!(
            "the doctor's overload check passed ({}) and so did its Retry-After check: {}",
            shedding.measured, retry_after.measured
        )),
        Grade::Fail => Verdict::fail(format!(
            "the route sheds ({}), but the doctor's Retry-After check failed: {}: {}",
            shedding.measured, retry_after.measured, retry_after.why
        )),
        Grade::Warn => Verdict::fail(format!(
            "the route sheds ({}), but the doctor's Retry-After check warned: {}: {}",
            shedding.measured, retry_after.measured, retry_after.why
        )),
        Grade::Skip => Verdict::fail(format!(
            "the route sheds ({}), but the doctor's Retry-After check was skipped: {}",
            shedding.measured, retry_after.why
        )),
    })
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
