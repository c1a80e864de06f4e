//! The check: serves the piece's work route (4 slots of 100 ms, at most 4
//! callers waiting) on 127.0.0.1 and runs the doctor's own overload check on
//! it: a ramp of closed-loop callers, 4, then 16 at a time, each giving up
//! after 1 s. From the same ramp the doctor grades the Retry-After of every
//! 503 it got; both findings must pass.

use std::process::ExitCode;

use anyhow::{Context, Result};
use axum::{Router, routing::get};
use exercise_kit::{Exercise, Variant, Verdict};
use lab_doctor::{Finding, Grade, checks::Probe, checks::load::overload};

#[path = "../solution/lib.rs"]
mod solution;

const EXERCISE: Exercise = Exercise::new(
    "doctor-retry-after",
    "Retry-After is delay-seconds (a whole number of seconds, in digits, like 2) or an HTTP \
     date, nothing else: round the wait up to whole seconds, at least 1, and send the number \
     (HeaderValue::from(seconds))",
);

const LOAD_PATH: &str = "/work";
const MAX_IN_FLIGHT: &str = "16";
const CALLER_TIMEOUT: &str = "1s";

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
    let work = match variant {
        Variant::Yours => Router::new()
            .route(LOAD_PATH, get(doctor_retry_after::work))
            .with_state(doctor_retry_after::WorkPool::new()),
        Variant::Solution => Router::new()
            .route(LOAD_PATH, get(solution::work))
            .with_state(solution::WorkPool::new()),
    };
    let app = Router::new()
        .route("/", get(|| async { "ok\n" }))
        .merge(work);
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
    let probe = Probe {
        addr,
        host: addr.to_string(),
        options: lab_doctor::options::parse(&arguments).context("the doctor's options")?,
    };
    let (shedding, retry_after) = overload(&probe).await?;
    drop(server);

    if shedding.grade != Grade::Pass {
        return Ok(Verdict::fail(format!(
            "the doctor's overload check on GET {LOAD_PATH} (up to {MAX_IN_FLIGHT} callers at \
             once, giving up after {CALLER_TIMEOUT}) said {}: the route must still shed what its \
             {} slots and {} waiters cannot take, at once (its Retry-After: {})",
            said(&shedding),
            solution::SLOTS,
            solution::QUEUE_LIMIT,
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
