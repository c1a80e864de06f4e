//! The check: the client-timeouts lab's downstreams on 127.0.0.1, the
//! silent one (accepts, reads the request, never answers) and the normal
//! one, a request to each through the piece's client, and how each ends.

use std::{process::ExitCode, time::Duration};

use anyhow::{Context, Result, ensure};
use exercise_kit::{Compression, Variant, Verdict};
use lab_client_timeouts::downstream::{Behaviour, Downstream, Shape};
use tokio::time::Instant;

exercise_kit::exercise!(
    "connect_timeout ends the handshake only, and this upstream completed it: give the client a \
     total timeout of the caller's deadline, which runs until the body's last byte, and keep a \
     short connect timeout beside it",
);

/// Time runs 50 times faster than in production, as in the lab's quick
/// mode: the caller's 30 s deadline is 600 ms here.
const COMPRESSION: Compression = Compression(50.0);
const DEADLINE: Duration = Duration::from_millis(600);
/// How long the check waits for the request to end: 150 s in production.
const BOUND: Duration = Duration::from_secs(3);

async fn check(variant: Variant) -> Result<Verdict> {
    let build: fn(Duration) -> reqwest::Result<reqwest::Client> = variant.pick(
        client_timeouts_silent_upstream::inventory_client,
        solution::inventory_client,
    );
    let client = build(DEADLINE).context("building the client")?;
    let behaviour = Behaviour {
        body_bytes: 64,
        trickle_every: Duration::from_millis(40),
    };
    // A healthy upstream first: a timeout must not stop a prompt answer.
    let normal = Downstream::start(Shape::Normal, behaviour).await?;
    let answered = tokio::time::timeout(BOUND, async {
        client.get(normal.url("/stock")).send().await?.bytes().await
    })
    .await
    .context("the healthy downstream's answer still not read after 3 s")?
    .context("a request to the healthy downstream")?;
    ensure!(
        answered.len() == 64,
        "the healthy downstream's body was cut short"
    );

    let silent = Downstream::start(Shape::Silent, behaviour).await?;
    let started = Instant::now();
    let outcome = tokio::time::timeout(BOUND, client.get(silent.url("/stock")).send()).await;
    let waited = started.elapsed();
    let deadline_s = COMPRESSION.production_s(DEADLINE);
    Ok(match outcome {
        Err(_) => Verdict::fail(format!(
            "a request to an upstream that accepted the connection and never answered was \
             still waiting after {:.0} s (time compressed {COMPRESSION}x: {} s), past the \
             caller's {deadline_s:.0} s deadline: nothing bounds the wait for the response, so \
             every such request holds its memory and its connection for as long as the \
             upstream stays silent",
            COMPRESSION.production_s(BOUND),
            BOUND.as_secs()
        )),
        Ok(Ok(response)) => Verdict::fail(format!(
            "the silent upstream answered {}, which it never does: the check is broken",
            response.status()
        )),
        Ok(Err(error)) if error.is_timeout() && waited < DEADLINE.mul_f64(0.9) => {
            Verdict::fail(format!(
                "the request to the silent upstream timed out after {:.0} s (time compressed \
                 {COMPRESSION}x: {} ms), before the caller's {deadline_s:.0} s deadline ({error})",
                COMPRESSION.production_s(waited),
                waited.as_millis()
            ))
        }
        Ok(Err(error)) if error.is_timeout() => Verdict::pass(format!(
            "the request to the silent upstream ended with a timeout after {:.0} s (time \
             compressed {COMPRESSION}x: {} ms), at the caller's {deadline_s:.0} s deadline; \
             the healthy upstream was answered",
            COMPRESSION.production_s(waited),
            waited.as_millis()
        )),
        Ok(Err(error)) => Verdict::fail(format!(
            "the request to the silent upstream ended after {} ms with an error that is not a \
             timeout ({error}); the upstream sent nothing, so only a timeout should end it",
            waited.as_millis()
        )),
    })
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
