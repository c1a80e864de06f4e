//! The check: serves the piece as `GET /quote` in front of the cancellation
//! lab's slow downstream (time compressed 10x), sends one request over
//! HTTP/1.1 that gives up early, and reads the downstream's own marks: when
//! it stopped working, and whether it finished.

use std::{process::ExitCode, time::Duration};

use anyhow::{Context, Result};
use axum::{Router, routing::get};
use exercise_kit::{Compression, Variant, Verdict, pick_async};
use lab_cancellation::{case_log::CaseLog, downstream};
use lab_kit::server::spawn_axum;

exercise_kit::exercise!(
    "a spawned task belongs to the runtime, not to the request: dropping the handler drops \
     only its JoinHandle. Await the call in the handler's own future, or give the spawned task \
     a CancellationToken that a drop guard in the handler cancels",
);

/// Time runs 10 times faster than in production, as in the lab's full mode.
const COMPRESSION: Compression = Compression(10.0);
/// The pricing call: 12 s in production.
const WORK: Duration = Duration::from_millis(1200);
/// When the user gives up: 2 s in production.
const LEAVE_AFTER: Duration = Duration::from_millis(200);

async fn check(variant: Variant) -> Result<Verdict> {
    let log = CaseLog::start();
    let pricing = downstream::start(WORK, std::sync::Arc::clone(&log)).await?;
    let pricing_url = pricing.url("/work");
    let outbound = reqwest::Client::new();
    let app = Router::new().route(
        "/quote",
        get(move || {
            let (client, url) = (outbound.clone(), pricing_url.clone());
            pick_async!(
                variant,
                cancellation_client_disconnect::quote(client, url),
                solution::quote(client, url),
            )
        }),
    );
    let server = spawn_axum(app).await?;
    let user = reqwest::Client::builder()
        .http1_only()
        .build()
        .context("building the client")?;
    let outcome = user
        .get(server.url("/quote"))
        .timeout(LEAVE_AFTER)
        .send()
        .await;
    log.mark(|marks, now| marks.client_done_ms = Some(now));
    anyhow::ensure!(
        outcome.is_err(),
        "the user got an answer before it gave up, from a downstream that takes {WORK:?}"
    );
    let marks = log
        .settle(WORK * 2, |marks| marks.downstream_end_ms.is_some())
        .await;
    server.stop(Duration::from_millis(200)).await?;
    pricing.stop(Duration::from_millis(200)).await?;
    let left_ms = marks.client_done_ms.unwrap_or(0.0);
    let remaining_ms = (WORK - LEAVE_AFTER).as_secs_f64() * 1000.0;
    let Some(end_ms) = marks.downstream_end_ms else {
        return Ok(Verdict::fail(format!(
            "the pricing call was still running {:.0} s after the client left (time \
             compressed {COMPRESSION}x): the work runs for nobody",
            COMPRESSION.production_s_of_ms(WORK.as_secs_f64() * 2000.0 - left_ms)
        )));
    };
    let after_ms = (end_ms - left_ms).max(0.0);
    let after_s = COMPRESSION.production_s_of_ms(after_ms);
    if marks.downstream_completed || after_ms > remaining_ms / 4.0 {
        let finished = if marks.downstream_completed {
            "finished its work"
        } else {
            "then stopped unfinished"
        };
        return Ok(Verdict::fail(format!(
            "the pricing call kept running {after_s:.1} s after the client left and {finished} \
             (time compressed {COMPRESSION}x: {after_ms:.0} ms, with {remaining_ms:.0} ms of \
             work left when the client went): the shared service worked for nobody"
        )));
    }
    Ok(Verdict::pass(format!(
        "the pricing call stopped {after_s:.1} s after the client left (time compressed \
         {COMPRESSION}x: {after_ms:.0} ms), unfinished, with {:.0} s of its work left undone",
        COMPRESSION.production_s_of_ms(remaining_ms - after_ms)
    )))
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
