//! The check: a router whose `/report` handler never returns, wrapped by the
//! piece (time compressed 50x), served by `axum::serve`. The server-timeouts
//! lab's raw client asks for `/report`, waits for an answer, and asks for `/`
//! on the same connection; a guard in the handler says whether it was dropped.

use std::{
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Result;
use axum::{Router, routing::get};
use exercise_kit::{Compression, Variant, Verdict};
use lab_kit::server::spawn_axum;
use lab_server_timeouts::stalled_client::{Answer, ConnectionEnd, RawConnection, get_request};

exercise_kit::exercise!(
    "a request body timeout only runs while a body is being read, and a GET has none: the \
     handler itself needs a deadline, a layer that drops its future when the time is up and \
     answers with a status you choose (tower-http has one beside the body timeout)",
);

/// Time runs 50 times faster than in production, as in the lab's quick mode.
const COMPRESSION: Compression = Compression(50.0);
/// The service's deadline: 15 s in production.
const DEADLINE: Duration = Duration::from_millis(300);
/// The balancer's timeout: 60 s in production.
const BALANCER: Duration = Duration::from_millis(1200);
/// How long the check waits for an answer: 100 s in production.
const WINDOW: Duration = Duration::from_millis(2000);

/// Sets its flag when the handler's future is dropped.
struct DroppedFlag(Arc<AtomicBool>);

impl Drop for DroppedFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn routes(dropped: Arc<AtomicBool>) -> Router {
    Router::new().route("/", get(|| async { "ok\n" })).route(
        "/report",
        get(move || async move {
            let _flag = DroppedFlag(dropped);
            // The database call that hangs.
            std::future::pending::<()>().await;
            "unreachable\n"
        }),
    )
}

/// Sends `GET path` and waits at most `bound` for the answer.
async fn ask(
    connection: &mut RawConnection,
    path: &str,
    bound: Duration,
) -> Option<Result<Answer, ConnectionEnd>> {
    if let Err(end) = connection.send(&get_request(path, "lab")).await {
        return Some(Err(end));
    }
    tokio::time::timeout(bound, connection.read_answer())
        .await
        .ok()
}

async fn check(variant: Variant) -> Result<Verdict> {
    let with_deadline: fn(Router, Duration) -> Router = variant.pick(
        server_timeouts_handler_deadline::with_deadline,
        solution::with_deadline,
    );
    let dropped = Arc::new(AtomicBool::new(false));
    let server = spawn_axum(with_deadline(routes(Arc::clone(&dropped)), DEADLINE)).await?;
    let mut connection = RawConnection::connect(server.addr, Duration::from_secs(2)).await?;
    let deadline_s = COMPRESSION.production_s(DEADLINE);
    let balancer_s = COMPRESSION.production_s(BALANCER);
    let started = Instant::now();
    let answer = match ask(&mut connection, "/report", WINDOW).await {
        None => {
            let still_running = if dropped.load(Ordering::SeqCst) {
                "its handler was dropped"
            } else {
                "its handler is still running"
            };
            return Ok(Verdict::fail(format!(
                "GET /report got no response after {:.0} s (time compressed {COMPRESSION}x: {} \
                 ms), past the {deadline_s:.0} s deadline and the balancer's {balancer_s:.0} s, \
                 and {still_running}: the client gets the balancer's 504, and the stuck work \
                 holds its connection and task for ever",
                COMPRESSION.production_s(WINDOW),
                WINDOW.as_millis()
            )));
        }
        Some(Err(end)) => {
            return Ok(Verdict::fail(format!(
                "GET /report got no response: the connection ended ({end:?}) after {} ms, so \
                 the client sees an error, not a status",
                started.elapsed().as_millis()
            )));
        }
        Some(Ok(answer)) => answer,
    };
    let waited = started.elapsed();
    let status = answer.status;
    let waited_s = COMPRESSION.production_s(waited);
    if waited > DEADLINE * 2 {
        let balancer = if waited >= BALANCER {
            format!(
                " and the balancer's {balancer_s:.0} s: its client already has the balancer's 504"
            )
        } else {
            ": the deadline that answers is not the one configured".to_string()
        };
        return Ok(Verdict::fail(format!(
            "GET /report was answered {status} after {waited_s:.0} s, past the {deadline_s:.0} s \
             deadline{balancer}"
        )));
    }
    if waited < DEADLINE / 2 || !(400..600).contains(&status) {
        return Ok(Verdict::fail(format!(
            "GET /report was answered {status} after {waited_s:.1} s, with a {deadline_s:.0} s \
             deadline: a deadline answers an error status at the deadline, not before it"
        )));
    }
    // The layer drops the handler's future as it answers; allow a moment.
    let settle = Instant::now();
    while !dropped.load(Ordering::SeqCst) && settle.elapsed() < Duration::from_millis(500) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    if !dropped.load(Ordering::SeqCst) {
        return Ok(Verdict::fail(format!(
            "GET /report was answered {status} after {waited_s:.0} s, but its handler was still \
             running: the client has an answer and the stuck work goes on for nobody"
        )));
    }
    let next = match ask(&mut connection, "/", Duration::from_secs(2)).await {
        Some(Ok(next)) => format!("answered {}", next.status),
        Some(Err(end)) => format!("ended ({end:?})"),
        None => "got no answer".to_string(),
    };
    let served_on = next == "answered 200";
    let accepted = server.stats.accepted();
    Ok(Verdict::when(
        served_on,
        format!(
            "GET /report was answered {status} after {waited_s:.0} s (time compressed \
             {COMPRESSION}x: {} ms), at the {deadline_s:.0} s deadline and before the balancer's \
             {balancer_s:.0} s; the stuck handler was dropped, and a GET / on the same \
             connection {next} ({accepted} connection accepted)",
            waited.as_millis()
        ),
    ))
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
