//! The check: two of the client-timeouts lab's downstreams on 127.0.0.1.
//! The one whose accept queue is full (the kernel drops the SYN: a dead
//! host) must fail within a bound; the trickling one (a byte at a steady
//! pace, far within the give-up time between two bytes, for several times
//! the give-up time in all) must be read to its end.

use std::{process::ExitCode, time::Duration};

use anyhow::{Context, Result};
use exercise_kit::{Compression, Variant, Verdict};
use lab_client_timeouts::downstream::{Behaviour, Downstream, Shape};
use tokio::time::Instant;

exercise_kit::exercise!(
    "a total timeout ends a transfer that is still moving: bound the handshake with \
     connect_timeout, and the wait between two reads with read_timeout, instead of the whole \
     request",
);

/// Time runs 10 times faster than in production: 5 s is 500 ms here.
const COMPRESSION: Compression = Compression(10.0);
const GIVE_UP_AFTER: Duration = Duration::from_millis(500);
/// The export: a byte every 2 s (200 ms here), 12 bytes, 24 s in all.
const TRICKLE: Behaviour = Behaviour {
    body_bytes: 12,
    trickle_every: Duration::from_millis(200),
};
/// Past this, the dead host's connect counts as hanging: 20 s in production.
const CONNECT_BOUND: Duration = Duration::from_secs(2);
/// The download's own bound: well past the 2.4 s it takes.
const DOWNLOAD_BOUND: Duration = Duration::from_secs(5);

/// How the download ended: bytes received, time taken, the error if any.
async fn download(client: &reqwest::Client, url: &str) -> (usize, Duration, Option<String>) {
    let started = Instant::now();
    let mut received = 0;
    let outcome = tokio::time::timeout(DOWNLOAD_BOUND, async {
        let mut response = client.get(url).send().await?;
        while let Some(chunk) = response.chunk().await? {
            received += chunk.len();
        }
        reqwest::Result::Ok(())
    })
    .await;
    let error = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(error)) => Some(if error.is_timeout() {
            "a timeout".to_string()
        } else {
            error.to_string()
        }),
        Err(_) => Some(format!(
            "still reading after {} s",
            DOWNLOAD_BOUND.as_secs()
        )),
    };
    (received, started.elapsed(), error)
}

async fn check(variant: Variant) -> Result<Verdict> {
    let build: fn(Duration) -> reqwest::Result<reqwest::Client> = variant.pick(
        client_timeouts_connect_vs_total::reports_client,
        solution::reports_client,
    );
    let client = build(GIVE_UP_AFTER).context("building the client")?;
    let give_up_s = COMPRESSION.production_s(GIVE_UP_AFTER);

    let dead = Downstream::start(Shape::NoHandshake, TRICKLE).await?;
    let started = Instant::now();
    let connect = tokio::time::timeout(CONNECT_BOUND, client.get(dead.url("/export")).send()).await;
    let connect_waited = started.elapsed();
    drop(dead);
    match connect {
        Err(_) => {
            return Ok(Verdict::fail(format!(
                "a request to a host that never completes the handshake was still connecting \
                 after {:.0} s (time compressed {COMPRESSION}x: {} s), past the {give_up_s:.0} s \
                 the client may wait on a dead host",
                COMPRESSION.production_s(CONNECT_BOUND),
                CONNECT_BOUND.as_secs()
            )));
        }
        Ok(Ok(response)) => {
            anyhow::bail!(
                "a host that never completes the handshake answered {}",
                response.status()
            )
        }
        Ok(Err(_)) => {}
    }

    let export = Downstream::start(Shape::Trickles, TRICKLE).await?;
    let (received, took, error) = download(&client, &export.url("/export")).await;
    let dead_s = COMPRESSION.production_s(connect_waited);
    let every_s = COMPRESSION.production_s(TRICKLE.trickle_every);
    Ok(match error {
        None if received == TRICKLE.body_bytes => Verdict::pass(format!(
            "the dead host failed after {dead_s:.1} s, and the export that sent a byte every \
             {every_s:.0} s was read to its end, {received} bytes in {:.0} s (time compressed \
             {COMPRESSION}x): each gap was within the {give_up_s:.0} s, and the whole took longer",
            COMPRESSION.production_s(took)
        )),
        None => Verdict::fail(format!(
            "the export ended after {received} of {} bytes without an error",
            TRICKLE.body_bytes
        )),
        Some(error) => Verdict::fail(format!(
            "the dead host failed after {dead_s:.1} s, but the healthy export was cut off by {error} \
             after {:.1} s (time compressed {COMPRESSION}x), {received} of {} bytes in, while the \
             server was still sending a byte every {every_s:.0} s: a deadline on the whole \
             request ends every transfer that takes longer than {give_up_s:.0} s, moving or not",
            COMPRESSION.production_s(took),
            TRICKLE.body_bytes
        )),
    })
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
