//! Slow read: a client that sends requests and never reads the answers.
//! The server's writes fill the socket buffers, then block; a server with
//! no write timeout keeps the connection, its buffers and its task for as
//! long as the client likes. hyper has header read timeouts, not write
//! timeouts, so a Rust server needs one of its own (see the doctor's
//! hardened service).
//!
//! The check keeps its receive buffer small, pipelines requests until a
//! write stalls (the server stopped reading because it cannot write), then
//! watches the socket's state in the kernel's table: the server's FIN shows
//! as CLOSE_WAIT at once, whatever sits unread in the buffer, and a reset
//! removes the socket.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use lab_kit::procnet::{TcpState, tcp_sockets};
use tokio::{io::AsyncWriteExt, net::TcpSocket};

use super::Probe;
use crate::finding::{Check, Finding, seconds};

/// A write that has not completed in this long: the server stopped reading.
const STALLED: Duration = Duration::from_millis(300);
/// Requests per write, and the most the check sends.
const BATCH: usize = 64;
const MOST: usize = 1_000_000;
/// Against a remote host (`--allow-remote`), far fewer.
const MOST_REMOTE: usize = 4_096;

// ANCHOR: slow_read
pub async fn slow_read(probe_of: &Probe) -> Result<Finding> {
    let path = match probe_of.options.paths.for_check(Check::SlowRead) {
        Ok(path) => path,
        Err(skipped) => return Ok(skipped),
    };
    let socket = if probe_of.addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .context("creating a socket")?;
    // The kernel doubles this and keeps a floor; small either way.
    socket
        .set_recv_buffer_size(4096)
        .context("setting SO_RCVBUF")?;
    let mut stream = tokio::time::timeout(Duration::from_secs(2), socket.connect(probe_of.addr))
        .await
        .context("connecting took over 2 s")?
        .with_context(|| format!("connecting to {}", probe_of.addr))?;
    let local_port = stream.local_addr()?.port();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", probe_of.host);
    let batch = request.repeat(BATCH).into_bytes();
    let mut sent = 0;
    let most = if probe_of.remote() { MOST_REMOTE } else { MOST };
    let check = Check::SlowRead;
    // Pipeline until a write stalls.
    loop {
        if sent >= most {
            return Ok(Finding::skip(
                check,
                format!(
                    "the server answered {most} pipelined GET {path} without its writes ever \
                     blocking; give --read-path a route with a large answer"
                ),
            ));
        }
        match tokio::time::timeout(STALLED, stream.write_all(&batch)).await {
            Err(_) => break,
            Ok(Ok(())) => sent += BATCH,
            Ok(Err(_)) => {
                return Ok(Finding::pass(
                    check,
                    format!("closed while {sent} answers went unread"),
                    Some(0.0),
                    "the server ends a connection whose client does not read its answers",
                ));
            }
        }
    }
    let stalled = Instant::now();
    let window = probe_of.options.window;
    let target_port = probe_of.addr.port();
    while stalled.elapsed() < window {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let ours = tcp_sockets()?
            .into_iter()
            .find(|row| row.local_port == local_port && row.remote_port == target_port);
        let ended = match ours {
            None => Some("reset"),
            Some(row) if row.state == TcpState::Established as u8 => None,
            Some(row) if row.state == TcpState::CloseWait as u8 => Some("closed"),
            Some(_) => Some("reset"),
        };
        if let Some(how) = ended {
            let after = stalled.elapsed();
            return Ok(Finding::pass(
                check,
                format!("{how} after {}", seconds(after)),
                Some(after.as_secs_f64()),
                "the server gives up on a client that stops reading its answers",
            ));
        }
    }
    drop(stream);
    Ok(Finding::fail(
        check,
        format!("still open at {}", seconds(window)),
        Some(window.as_secs_f64()),
        format!(
            "after {sent} pipelined requests the server's writes blocked and it waited for the \
             client to read, with no limit: a write timeout would end it (hyper has none)"
        ),
    ))
}
// ANCHOR_END: slow_read
