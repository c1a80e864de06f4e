//! The handler deadline: one request to a slow path, waited on for the
//! window. Does the server ever cut it, and with what status?

use std::time::{Duration, Instant};

use anyhow::Result;
use lab_kit::fetch::FetchError;

use super::Patient;
use crate::finding::{Check, Finding, seconds};

/// A path that answers 2xx faster than this is not slow: nothing to learn.
const NOT_SLOW: Duration = Duration::from_secs(1);

pub async fn handler_deadline(patient: &Patient) -> Result<Finding> {
    let check = Check::HandlerDeadline;
    let path = match patient.options.paths.for_check(check) {
        Ok(path) => path,
        Err(skipped) => return Ok(skipped),
    };
    let window = patient.options.window;
    let client = patient.client()?;
    let started = Instant::now();
    let answer = client.status(&patient.url(path), window).await;
    let after = started.elapsed();
    let at = seconds(after);
    Ok(match answer {
        Ok(status) => match status {
            408 | 500..=599 => Finding::pass(
                check,
                format!("cut after {at} with {status}"),
                Some(after.as_secs_f64()),
                "the server bounds a slow handler and tells the caller with a status",
            ),
            _ if after < NOT_SLOW => Finding::skip(
                check,
                format!("GET {path} answered {status} in {at}: not slow, so nothing to cut"),
            ),
            _ => Finding::warn(
                check,
                format!("finished after {at} with {status}"),
                Some(after.as_secs_f64()),
                "nothing cut it: a handler slower than this would hold its caller, its \
                     connection and its task as long as it runs (add a handler deadline)",
            ),
        },
        Err(FetchError::Timeout) => Finding::fail(
            check,
            format!("no answer at {}", seconds(window)),
            Some(window.as_secs_f64()),
            "the server lets a handler run as long as it likes: its callers time out first and \
             their work goes on (add a handler deadline that answers 503 or 504)",
        ),
        Err(_) => Finding::warn(
            check,
            format!("connection ended after {at}, no status"),
            Some(after.as_secs_f64()),
            "the server cut the request without an answer: the caller sees a reset, not a 503 \
             or 504 it could act on",
        ),
    })
}
