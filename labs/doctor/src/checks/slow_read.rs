//! Slow read: a client that sends requests and never reads the answers.
//! The server's writes fill the socket buffers, then block; a server with
//! no write timeout keeps the connection, its buffers and its task for as
//! long as the client likes. hyper has header read timeouts, not write
//! timeouts, so a Rust server needs one of its own (see the doctor's
//! hardened service).
//!
//! The check keeps its receive buffer small, pipelines requests until a
//! write stalls (the server stopped reading because it cannot write), then
//! asks the kernel for the socket's state (`TCP_INFO`, a system call; the
//! whole table in /proc/net/tcp costs milliseconds to read on a busy machine):
//! the server's FIN shows as CLOSE_WAIT at once, whatever sits unread in the
//! buffer, and a reset as CLOSE.

use std::{
    os::fd::AsRawFd,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use lab_kit::conn::Conn;
use lab_kit::procnet::{TcpState, tcp_info};
use tokio::{io::AsyncWriteExt, net::TcpSocket};

use super::Patient;
use crate::finding::{Check, Finding, seconds};

/// A write that has not completed in this long: the server stopped reading.
const STALLED: Duration = Duration::from_millis(300);
/// Requests per write, and the most the check sends.
const BATCH: usize = 64;
const MOST: usize = 1_000_000;
/// Against a remote host (`--allow-remote`), far fewer.
const MOST_REMOTE: usize = 4_096;

/// How the pipelining ended.
pub enum Filled {
    /// A write stalled: the server stopped reading.
    Stalled(Stalled),
    /// The check ended before a stall: closed, or never blocked.
    Found(Finding),
}

/// A connection whose server's writes are blocked on our unread answers.
pub struct Stalled {
    stream: Conn,
    sent: usize,
    at: Instant,
}

// ANCHOR: slow_read
pub async fn slow_read(patient: &Patient) -> Result<Finding> {
    match fill(patient).await? {
        Filled::Stalled(stalled) => watch(patient, stalled).await,
        Filled::Found(finding) => Ok(finding),
    }
}

/// The first half: pipeline requests until a write stalls.
pub async fn fill(patient: &Patient) -> Result<Filled> {
    let path = match patient.options.paths.for_check(Check::SlowRead) {
        Ok(path) => path,
        Err(skipped) => return Ok(Filled::Found(skipped)),
    };
    let socket = if patient.addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .context("creating a socket")?;
    // The kernel doubles this and keeps a floor; small either way.
    socket
        .set_recv_buffer_size(4096)
        .context("setting SO_RCVBUF")?;
    let stream = tokio::time::timeout(Duration::from_secs(2), socket.connect(patient.addr))
        .await
        .context("connecting took over 2 s")?
        .with_context(|| format!("connecting to {}", patient.addr))?;
    // Over TLS, the handshake on that same small-buffered socket.
    let mut stream = tokio::time::timeout(Duration::from_secs(5), patient.connector.over(stream))
        .await
        .context("the TLS handshake took over 5 s")?
        .context("the TLS handshake")?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", patient.host);
    let batch = request.repeat(BATCH).into_bytes();
    let mut sent = 0;
    let most = if patient.remote() { MOST_REMOTE } else { MOST };
    loop {
        if sent >= most {
            return Ok(Filled::Found(Finding::skip(
                Check::SlowRead,
                format!(
                    "the server answered {most} pipelined GET {path} without its writes ever \
                     blocking; give --read-path a route with a large answer"
                ),
            )));
        }
        match tokio::time::timeout(STALLED, stream.write_all(&batch)).await {
            Err(_) => break,
            Ok(Ok(())) => sent += BATCH,
            Ok(Err(_)) => {
                return Ok(Filled::Found(Finding::pass(
                    Check::SlowRead,
                    format!("closed while {sent} answers went unread"),
                    Some(0.0),
                    "the server ends a connection whose client does not read its answers",
                )));
            }
        }
    }
    Ok(Filled::Stalled(Stalled {
        stream,
        sent,
        at: Instant::now(),
    }))
}

/// The second half: watch the stalled connection in the kernel's table for
/// one window.
pub async fn watch(patient: &Patient, stalled: Stalled) -> Result<Finding> {
    let window = patient.options.window;
    while stalled.at.elapsed() < window {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let state = tcp_info(stalled.stream.tcp().as_raw_fd())
            .context("reading the socket's TCP_INFO")?
            .tcpi_state;
        let ended = match state {
            s if s == TcpState::Established as u8 => None,
            s if s == TcpState::CloseWait as u8 => Some("closed"),
            _ => Some("reset"),
        };
        if let Some(how) = ended {
            let after = stalled.at.elapsed();
            return Ok(Finding::pass(
                Check::SlowRead,
                format!("{how} after {}", seconds(after)),
                Some(after.as_secs_f64()),
                "the server gives up on a client that stops reading its answers",
            ));
        }
    }
    Ok(Finding::fail(
        Check::SlowRead,
        format!("still open at {}", seconds(window)),
        Some(window.as_secs_f64()),
        format!(
            "after {} pipelined requests the server's writes blocked and it waited for the \
             client to read, with no limit: a write timeout would end it (hyper has none)",
            stalled.sent
        ),
    ))
}
// ANCHOR_END: slow_read
