//! The check: serves a router with the piece (time compressed 50x), makes
//! sure a complete request is answered, then plays the server-timeouts lab's
//! half-header client (slowloris) against it and watches the connection.

use std::{process::ExitCode, time::Duration};

use anyhow::{Context, Result};
use exercise_kit::{Compression, Variant, Verdict, pick_async};
use lab_kit::net::{AbortOnDrop, bind_loopback};
use lab_server_timeouts::stalled_client::{
    ConnectionEnd, RawConnection, StalledClient, get_request, watch,
};

exercise_kit::exercise!(
    "axum::serve 0.8 never sets a timer, and hyper's header read timeout needs one: serve each \
     accepted connection yourself with hyper's http1::Builder, give it a TokioTimer and a \
     header_read_timeout (lab_kit::server shows the accept loop)",
);

/// Time runs 50 times faster than in production, as in the lab's quick mode.
const COMPRESSION: Compression = Compression(50.0);
/// The service's head timeout: 20 s in production.
const HEAD_TIMEOUT: Duration = Duration::from_millis(400);
/// How long the check watches the half-sent head: 100 s in production.
const WINDOW: Duration = Duration::from_millis(2000);
/// How long a complete request may wait for its answer on a busy machine.
const PATIENCE: Duration = Duration::from_secs(3);

/// A complete request on a fresh connection: its status, or why none came.
async fn answer_status(addr: std::net::SocketAddr) -> Result<Result<u16, String>> {
    let mut connection = RawConnection::connect(addr, PATIENCE).await?;
    if let Err(end) = connection.send(&get_request("/", "lab")).await {
        return Ok(Err(format!("{end:?} while sending")));
    }
    Ok(
        match tokio::time::timeout(PATIENCE, connection.read_answer()).await {
            Err(_) => Err(format!("nothing within {} s", PATIENCE.as_secs())),
            Ok(Err(ConnectionEnd::Closed)) => Err("the server closed the connection".into()),
            Ok(Err(ConnectionEnd::Reset)) => Err("the server reset the connection".into()),
            Ok(Err(ConnectionEnd::Failed(why))) => Err(why),
            Ok(Ok(answer)) => Ok(answer.status),
        },
    )
}

async fn check(variant: Variant) -> Result<Verdict> {
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "ok\n" }));
    let listener = bind_loopback().await?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let _server = AbortOnDrop::spawn(pick_async!(
        variant,
        server_timeouts_slow_head::serve(listener, app, HEAD_TIMEOUT),
        solution::serve(listener, app, HEAD_TIMEOUT),
    ));

    match answer_status(addr).await? {
        Ok(200) => {}
        Ok(status) => {
            return Ok(Verdict::fail(format!(
                "a complete GET / was answered {status}, not 200: the server must still serve"
            )));
        }
        Err(why) => {
            return Ok(Verdict::fail(format!(
                "a complete GET / got no answer ({why}): the server must still serve (a \
                 header_read_timeout without a timer makes hyper panic on every connection)"
            )));
        }
    }

    let head_s = COMPRESSION.production_s(HEAD_TIMEOUT);
    let window_ms = WINDOW.as_secs_f64() * 1000.0;
    let outcome = watch(addr, StalledClient::HalfHeader, WINDOW).await?;
    Ok(match outcome.closed {
        None => Verdict::fail(format!(
            "a connection that sent half a request head was still open at {:.0} s (time \
             compressed {COMPRESSION}x: {window_ms:.0} ms), past the {head_s:.0} s head timeout: \
             each slowloris client holds a socket and a task for as long as it likes",
            COMPRESSION.production_s_of_ms(window_ms)
        )),
        Some((how, ms)) if ms < HEAD_TIMEOUT.as_secs_f64() * 500.0 => Verdict::fail(format!(
            "a half-sent head was {how} after {:.1} s (time compressed {COMPRESSION}x: {ms:.0} \
             ms), long before the {head_s:.0} s head timeout: a slow but honest client is cut off",
            COMPRESSION.production_s_of_ms(ms)
        )),
        Some((how, ms)) if ms > HEAD_TIMEOUT.as_secs_f64() * 2000.0 => Verdict::fail(format!(
            "a half-sent head was {how} only after {:.0} s (time compressed {COMPRESSION}x: \
             {ms:.0} ms), long after the {head_s:.0} s head timeout: a slowloris client holds \
             each connection that much longer",
            COMPRESSION.production_s_of_ms(ms)
        )),
        Some((how, ms)) => Verdict::pass(format!(
            "a connection that sent half a request head was {how} after {:.0} s (time \
             compressed {COMPRESSION}x: {ms:.0} ms), at the {head_s:.0} s head timeout, and a \
             complete request was answered 200",
            COMPRESSION.production_s_of_ms(ms)
        )),
    })
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
