//! The checks that hold one connection and watch what the server does with
//! it: the idle keep-alive connection (the keep-alive lab's probe), and the
//! slow head and slow body (the server-timeouts lab's stalled clients, here
//! on the reader's paths).

use std::time::Duration;

use anyhow::Result;
use lab_keepalive_race::probe::{IdleProbeConfig, probe};
use lab_server_timeouts::stalled_client::{WatchOutcome, watch_request};

use super::Patient;
use crate::finding::{Check, Finding, Grade, seconds};

/// An answer that comes this fast did not wait for the rest of the body.
const AT_ONCE: Duration = Duration::from_millis(250);

// ANCHOR: idle
pub async fn idle_keepalive(patient: &Patient) -> Result<Finding> {
    let balancer = patient.options.balancer_idle;
    let window = patient.options.window;
    let mut config = IdleProbeConfig::new(patient.addr, window);
    config.host = patient.host.clone();
    config.path = patient.options.paths.fast.clone();
    config.connector = patient.connector.clone();
    let report = probe(&config).await?;
    let advertised = match report.advertised_s {
        Some(hint) => format!(" (it advertises Keep-Alive: timeout={hint})"),
        None => String::new(),
    };
    let check = Check::IdleKeepAlive;
    if report.connection_close {
        return Ok(Finding::warn(
            check,
            format!(
                "answered {} without keep-alive (Connection: close, or HTTP/1.0)",
                report.status
            ),
            None,
            "no keep-alive at all: no idle race, but every request behind a balancer pays a new \
             connection",
        ));
    }
    Ok(match report.closed_after_ms {
        Some(millis) => {
            let closed = Duration::from_secs_f64(millis / 1000.0);
            let how = report.how.unwrap_or("closed");
            let measured = format!("{how} after {}{advertised}", seconds(closed));
            let (grade, why) = if closed <= balancer {
                let why = format!(
                    "it closes idle connections before the balancer's {} idle timeout, so the \
                     balancer can send a request onto a connection the server is closing: a \
                     502 (set its idle timeout above the balancer's)",
                    seconds(balancer)
                );
                (Grade::Fail, why)
            } else {
                let why = format!(
                    "later than the balancer's {} idle timeout, so the balancer closes first; \
                     and it does reclaim idle connections itself",
                    seconds(balancer)
                );
                (Grade::Pass, why)
            };
            Finding::new(check, grade, measured, Some(closed.as_secs_f64()), why)
        }
        None => {
            let why = if window <= balancer {
                format!(
                    "the balancer's {} idle timeout is beyond this run's window: run with \
                     --window above it to know whether the server closes first",
                    seconds(balancer)
                )
            } else {
                format!(
                    "safe behind a balancer with a {} idle timeout, but the server may never \
                     reclaim an idle connection itself: each one holds a socket and a task \
                     (axum::serve has no idle timeout)",
                    seconds(balancer)
                )
            };
            let measured = format!("still open at {}{advertised}", seconds(window));
            Finding::warn(check, measured, Some(window.as_secs_f64()), why)
        }
    })
}
// ANCHOR_END: idle

// ANCHOR: slow_head
pub async fn slow_head(patient: &Patient) -> Result<Finding> {
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\n",
        patient.options.paths.fast, patient.host
    );
    let window = patient.options.window;
    let seen = watched(patient, &request).await?;
    // hyper's header read timer is also its idle timer, so a server behind a
    // balancer sets it above the balancer's idle timeout (90 s behind 60 s):
    // a window shorter than that cannot tell such a timeout from none.
    let telling = patient.options.balancer_idle.mul_f64(1.5);
    if seen.first_action_ms().is_none() && window <= telling {
        return Ok(Finding::warn(
            Check::SlowHead,
            format!("still open at {}", seconds(window)),
            Some(window.as_secs_f64()),
            format!(
                "no timeout within this window, but a header read timeout above the \
                 balancer's idle timeout may still be coming: give --window above {} to tell \
                 it from none",
                seconds(telling)
            ),
        ));
    }
    Ok(ended_in_time(
        Check::SlowHead,
        &seen,
        window,
        "half a request head",
    ))
}
// ANCHOR_END: slow_head

pub async fn slow_body(patient: &Patient) -> Result<Finding> {
    let path = match patient.options.paths.for_check(Check::SlowBody) {
        Ok(path) => path,
        Err(skipped) => return Ok(skipped),
    };
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: 100\r\n\r\nabc",
        patient.host
    );
    let window = patient.options.window;
    let seen = watched(patient, &request).await?;
    if let Some((status, at_ms)) = seen.answered
        && at_ms < AT_ONCE.as_secs_f64() * 1000.0
        && !matches!(status, 400 | 408 | 413)
    {
        return Ok(Finding::skip(
            Check::SlowBody,
            format!(
                "POST {path} answered {status} at once without waiting for the body: this route \
                 does not read one; give --body-path a route that does"
            ),
        ));
    }
    Ok(ended_in_time(
        Check::SlowBody,
        &seen,
        window,
        "a body that stops after 3 of 100 bytes",
    ))
}

/// Sends `request` on a connection of its own (plain or TLS) and watches
/// it for the window.
async fn watched(patient: &Patient, request: &str) -> Result<WatchOutcome> {
    let window = patient.options.window;
    watch_request(
        &patient.connector,
        patient.addr,
        request.as_bytes(),
        false,
        window,
    )
    .await
}

/// Pass if the server answered or ended the connection within the window;
/// fail if it was still waiting for the client at the end.
fn ended_in_time(check: Check, seen: &WatchOutcome, window: Duration, what: &str) -> Finding {
    let first = seen.first_action_ms().map(|millis| {
        let at = Duration::from_secs_f64(millis / 1000.0);
        (
            at,
            format!("{} after {:.2} s", seen.verdict(), millis / 1000.0),
        )
    });
    let cost = "a few hundred such connections hold as many sockets and tasks (give it a \
        header read or body timeout)";
    Finding::ended_in_time(check, first, window, what, cost)
}
