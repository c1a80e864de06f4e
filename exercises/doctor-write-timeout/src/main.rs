//! The check: serves a route with a 256 KiB answer through hyper's HTTP/1
//! builder, each accepted connection wrapped in the piece (write timeout
//! 300 ms: 30 s in production, time compressed 100x). First a client that
//! reads slowly but steadily must get every answer; then the doctor's own
//! slow-read check pipelines requests, reads nothing, and watches its
//! socket for 2 s.

use std::{
    net::SocketAddr,
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use axum::{Router, routing::get};
use exercise_kit::{Compression, Variant, Verdict};
use hyper_util::{rt::TokioIo, service::TowerToHyperService};
use lab_doctor::{Grade, checks::Patient, checks::slow_read::slow_read};
use lab_kit::{
    net::{AbortOnDrop, spawn_accept_loop},
    stream::{HookedStream, StreamHook},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpSocket,
};

exercise_kit::exercise!(
    "a waker is the only thing that polls a pending write again, and a client that reads nothing \
     never wakes it: when a write is Pending, arm a tokio::time::Sleep of the limit, keep it in \
     the wrapper (one per blocked write, not a new one per poll) and poll it with the same \
     context, so the runtime's timer wakes the task at the deadline; disarm it when a write \
     makes progress",
);

/// Time runs 100 times faster than in production.
const COMPRESSION: Compression = Compression(100.0);
/// The service's write timeout: 30 s in production.
const WRITE_TIMEOUT: Duration = Duration::from_millis(300);
/// The header read timeout (also hyper's idle timeout), well past the
/// window, so that only the write timeout can end the slow read.
const HEADER_READ: Duration = Duration::from_secs(10);
/// How long the doctor watches the stalled connection: 200 s in production.
const WINDOW: Duration = Duration::from_secs(2);
/// The large answer: more than the socket buffers of a client that reads nothing.
const BODY: usize = 256 * 1024;
const READ_PATH: &str = "/big";
/// The steady client: this many answers on one connection, read
/// `STEADY_CHUNK` at a time with `STEADY_PAUSE` between (a phone on a slow
/// link: never a third of the write timeout without reading).
const STEADY_ANSWERS: usize = 4;
const STEADY_CHUNK: usize = 128 * 1024;
const STEADY_PAUSE: Duration = Duration::from_millis(100);
/// The server's socket send buffer (the kernel doubles it). Fixed and small,
/// so that a client pausing for 100 ms really makes the server's writes
/// wait: with the kernel's autotuning, loopback buffers take megabytes.
const SERVER_SEND_BUFFER: u32 = 64 * 1024;

/// Serves the routes on `listener`, each connection in a `HookedStream`
/// with the hook `hook` makes.
fn serve<F, H>(listener: tokio::net::TcpListener, hook: F) -> AbortOnDrop
where
    F: Fn(Duration) -> H + Send + 'static,
    H: StreamHook + Send + 'static,
{
    let app = Router::new()
        .route("/", get(|| async { "ok\n" }))
        .route(READ_PATH, get(|| async { "x".repeat(BODY) }));
    let builder = lab_kit::server::http1_builder(Some(HEADER_READ));
    spawn_accept_loop(listener, move |stream, _peer| {
        let io = TokioIo::new(HookedStream::new(stream, hook(WRITE_TIMEOUT)));
        let connection = builder.serve_connection(io, TowerToHyperService::new(app.clone()));
        async move {
            // A write timeout or a client that left ends it with an error.
            let _ = connection.await;
        }
    })
}

/// What the steady client got: answers, bytes, and how the connection ended.
struct Steady {
    answers: usize,
    bytes: usize,
    ended: String,
    took: Duration,
}

/// Pipelines `STEADY_ANSWERS` requests for the large answer (the last asks
/// the server to close) and reads them slowly but steadily until the end.
async fn steady_client(addr: SocketAddr) -> Result<Steady> {
    let socket = TcpSocket::new_v4().context("creating a socket")?;
    // A small window, so the server's writes really wait for this reader.
    socket
        .set_recv_buffer_size(16 * 1024)
        .context("setting SO_RCVBUF")?;
    let mut stream = tokio::time::timeout(Duration::from_secs(2), socket.connect(addr))
        .await
        .context("connecting took over 2 s")?
        .with_context(|| format!("connecting to {addr}"))?;
    let mut requests = String::new();
    for at in 1..=STEADY_ANSWERS {
        let close = if at == STEADY_ANSWERS {
            "Connection: close\r\n"
        } else {
            ""
        };
        requests.push_str(&format!(
            "GET {READ_PATH} HTTP/1.1\r\nHost: {addr}\r\n{close}\r\n"
        ));
    }
    stream
        .write_all(requests.as_bytes())
        .await
        .context("sending the steady client's requests")?;
    let started = Instant::now();
    let mut received = Vec::with_capacity(STEADY_ANSWERS * (BODY + 256));
    let mut buffer = vec![0u8; 16 * 1024];
    let ended = 'reading: loop {
        let mut this_chunk = 0;
        while this_chunk < STEADY_CHUNK {
            match stream.read(&mut buffer).await {
                Ok(0) => break 'reading "closed".to_string(),
                Ok(read) => {
                    received.extend_from_slice(&buffer[..read]);
                    this_chunk += read;
                }
                Err(error) => break 'reading format!("ended by an error ({error})"),
            }
        }
        tokio::time::sleep(STEADY_PAUSE).await;
    };
    let answers = received
        .windows(b"HTTP/1.1 200".len())
        .filter(|window| *window == b"HTTP/1.1 200")
        .count();
    Ok(Steady {
        answers,
        bytes: received.len(),
        ended,
        took: started.elapsed(),
    })
}

async fn check(variant: Variant) -> Result<Verdict> {
    // Accepted sockets inherit the listener's buffer sizes.
    let socket = TcpSocket::new_v4().context("creating the server's socket")?;
    socket
        .set_send_buffer_size(SERVER_SEND_BUFFER)
        .context("setting SO_SNDBUF")?;
    socket
        .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .context("binding 127.0.0.1:0")?;
    let listener = socket.listen(1024).context("listening")?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let _server = match variant {
        Variant::Yours => serve(listener, doctor_write_timeout::WriteDeadline::new),
        Variant::Solution => serve(listener, solution::WriteDeadline::new),
    };
    let limit_ms = WRITE_TIMEOUT.as_millis();
    let limit_s = COMPRESSION.production_s(WRITE_TIMEOUT);

    // A slow but honest client must get everything.
    let steady = tokio::time::timeout(Duration::from_secs(10), steady_client(addr))
        .await
        .context("the steady client did not finish within 10 s")??;
    let whole = STEADY_ANSWERS * BODY;
    if steady.answers < STEADY_ANSWERS || steady.bytes < whole {
        return Ok(Verdict::fail(format!(
            "a client that read {} KiB, paused {} ms, and read on (never a pause near the {limit_ms} \
             ms write timeout) got {} of {STEADY_ANSWERS} answers, {} of {} KiB, before the \
             connection was {} after {:.2} s: the write timeout cut off a client that was \
             reading; it must fire only when a write has waited the whole limit",
            STEADY_CHUNK / 1024,
            STEADY_PAUSE.as_millis(),
            steady.answers,
            steady.bytes / 1024,
            whole / 1024,
            steady.ended,
            steady.took.as_secs_f64()
        )));
    }

    // The doctor's slow-read check: requests sent, answers never read.
    let arguments: Vec<String> = [&addr.to_string(), "slow-read", "--read-path", READ_PATH]
        .iter()
        .map(|word| word.to_string())
        .collect();
    let mut options = lab_doctor::options::parse(&arguments).context("the doctor's options")?;
    options.window = WINDOW;
    let probe = Patient::plain(addr, options);
    let finding = slow_read(&probe).await?;
    let window_s = COMPRESSION.production_s(WINDOW);
    Ok(match finding.grade {
        Grade::Fail => Verdict::fail(format!(
            "a client that pipelined GET {READ_PATH} and read none of the answers was {} after \
             the server's writes blocked (time compressed {COMPRESSION}x: {window_s:.0} s in \
             production), past the {limit_ms} ms write timeout ({limit_s:.0} s in production): \
             the timeout never fired, so such a client holds a socket, its buffers and a task for \
             as long as it likes",
            finding.measured
        )),
        Grade::Pass
            if finding
                .value
                .is_some_and(|after| after > 4.0 * WRITE_TIMEOUT.as_secs_f64()) =>
        {
            Verdict::fail(format!(
                "a client that read none of its answers was {}, counted from when its own writes                  stalled: over four times the {limit_ms} ms write timeout, so the timer fires                  late (or something else ended the connection)",
                finding.measured
            ))
        }
        Grade::Pass => Verdict::pass(format!(
            "a client that read steadily got all {STEADY_ANSWERS} answers ({} KiB) in {:.2} s, \
             and one that pipelined GET {READ_PATH} and read nothing was {} (the doctor's \
             slow-read check: pass), with a {limit_ms} ms write timeout ({limit_s:.0} s in \
             production)",
            steady.bytes / 1024,
            steady.took.as_secs_f64(),
            finding.measured
        )),
        Grade::Warn | Grade::Skip => Verdict::fail(format!(
            "the doctor's slow read was inconclusive ({}: {}): {}",
            finding.grade.label(),
            finding.measured,
            finding.why
        )),
    })
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
