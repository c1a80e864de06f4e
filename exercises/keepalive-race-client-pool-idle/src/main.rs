//! The check: the keep-alive lab's backend (hyper's HTTP/1 server with a
//! timer, whose header read timeout is its idle timeout) behind the lab's
//! link-delay shim, and clients built by the piece that each send a request,
//! wait a gap a little shorter than the API's idle timeout, and send another.
//! One more client, straight to the API, checks that the pool still reuses.

use std::{
    net::SocketAddr,
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result};
use exercise_kit::{Compression, Variant, Verdict};
use hyper_util::{rt::TokioIo, service::TowerToHyperService};
use lab_keepalive_race::{backend::app, link_delay::LinkDelay};
use lab_kit::{
    net::{AbortOnDrop, bind_loopback, spawn_accept_loop},
    server::http1_builder,
};

exercise_kit::exercise!(
    "the API starts its idle timer when it sends a response, and the next request reaches it a \
     round trip after the pool's timer started: make the pool drop idle connections well before \
     the API does, by a margin far larger than a round trip",
);

/// Time runs 50 times faster than in production, as in the lab's quick
/// mode: the API's 30 s idle timeout is 600 ms here.
const COMPRESSION: Compression = Compression(50.0);
const API_IDLE: Duration = Duration::from_millis(600);
/// The shim's one-way delay. Not compressed: a long link makes the race
/// window wide enough to land in every time, on a busy machine too.
const ONE_WAY: Duration = Duration::from_millis(250);
/// Gaps inside the race window: a request sent after one of these arrives
/// after the API closed, and leaves before the API's close reached the client.
const RACE_GAPS_MS: [u64; 3] = [420, 460, 500];
/// A gap after which any sane pool still reuses its connection.
const SHORT_GAP: Duration = Duration::from_millis(100);

type Build = fn(Duration) -> reqwest::Result<reqwest::Client>;

/// The API: `app()` on hyper's HTTP/1 server with the idle timeout, in an
/// accept loop that counts the connections it accepts.
async fn api() -> Result<(SocketAddr, Arc<AtomicUsize>, AbortOnDrop)> {
    let listener = bind_loopback().await?;
    let addr = listener.local_addr().context("reading the API's address")?;
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    let builder = http1_builder(Some(API_IDLE));
    let router = app();
    let task = spawn_accept_loop(listener, move |stream, _peer| {
        counter.fetch_add(1, Ordering::SeqCst);
        let service = TowerToHyperService::new(router.clone());
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        async move {
            let _ = connection.await;
        }
    });
    Ok((addr, accepted, task))
}

/// The innermost cause of an error, as text.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(source) = current.source() {
        current = source;
    }
    current.to_string()
}

/// One GET, read to its end, bounded.
async fn get(client: &reqwest::Client, url: &str) -> Result<(), String> {
    let sent = async {
        client
            .get(url)
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await
    };
    match tokio::time::timeout(Duration::from_secs(3), sent).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(root_cause(&error)),
        Err(_) => Err("still waiting after 3 s".to_string()),
    }
}

/// A request, a gap, a request on a fresh client; the second one's outcome
/// and how many connections the API accepted for both.
async fn after_gap(build: Build, gap: Duration, link: bool) -> Result<(Result<(), String>, usize)> {
    let (addr, accepted, _api) = api().await?;
    let shim = LinkDelay::spawn(addr, ONE_WAY).await?;
    let target = if link { shim.addr } else { addr };
    let url = format!("http://{target}/");
    let client = build(API_IDLE).context("building the client")?;
    get(&client, &url)
        .await
        .map_err(|error| anyhow::anyhow!("the first request: {error}"))?;
    tokio::time::sleep(gap).await;
    let second = get(&client, &url).await;
    Ok((second, accepted.load(Ordering::SeqCst)))
}

async fn check(variant: Variant) -> Result<Verdict> {
    let build: Build = variant.pick(
        keepalive_race_client_pool_idle::orders_client,
        solution::orders_client,
    );
    let races =
        RACE_GAPS_MS.map(|ms| tokio::spawn(after_gap(build, Duration::from_millis(ms), true)));
    let short = tokio::spawn(after_gap(build, SHORT_GAP, false));
    let mut failed = Vec::new();
    let mut race_connections = 0;
    for (task, ms) in races.into_iter().zip(RACE_GAPS_MS) {
        let (second, connections) = task.await.context("a client task panicked")??;
        race_connections += connections;
        if let Err(error) = second {
            failed.push((ms, error));
        }
    }
    let (short_second, short_connections) = short.await.context("a client task panicked")??;
    let api_s = COMPRESSION.production_s(API_IDLE);
    let gaps = RACE_GAPS_MS
        .map(|ms| format!("{:.0}", COMPRESSION.production_s(Duration::from_millis(ms))))
        .join(", ");
    if let Err(error) = short_second {
        return Ok(Verdict::fail(format!(
            "a request {:.0} s after the previous one failed: {error}",
            COMPRESSION.production_s(SHORT_GAP)
        )));
    }
    Ok(if !failed.is_empty() {
        let (ms, error) = &failed[0];
        Verdict::fail(format!(
            "{} of {} requests sent after gaps of {gaps} s (time compressed {COMPRESSION}x; \
             the API closes idle connections after {api_s:.0} s) failed on connections the API \
             had already closed, its close still on the way; after {:.0} s: \"{error}\". A \
             request that was written cannot be retried safely, so the caller gets the error",
            failed.len(),
            RACE_GAPS_MS.len(),
            COMPRESSION.production_s(Duration::from_millis(*ms)),
        ))
    } else if short_connections > 1 {
        Verdict::fail(format!(
            "no request failed, but two requests {:.0} s apart took {short_connections} \
             connections: the pool no longer reuses a connection that was idle for far less \
             than the API's {api_s:.0} s",
            COMPRESSION.production_s(SHORT_GAP)
        ))
    } else {
        Verdict::pass(format!(
            "all {} requests sent after gaps of {gaps} s (time compressed {COMPRESSION}x) were \
             answered, with {race_connections} connections for their {} requests: the pool \
             dropped the idle ones before the API's {api_s:.0} s and opened new ones; and two \
             requests {:.0} s apart still shared one connection",
            RACE_GAPS_MS.len(),
            RACE_GAPS_MS.len() * 2,
            COMPRESSION.production_s(SHORT_GAP)
        ))
    })
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
