//! A small static file server for the built book, on 127.0.0.1 only. It is
//! also what the browser tests open pages from.
//!
//! A browser opens several connections at once and keeps them alive between
//! requests, so the server gives every connection its own thread, answers
//! any number of requests on one connection, writes each response whole
//! (head and body in one buffer, `write_all` through partial writes), and
//! closes a connection only in a way that cannot destroy a response still in
//! flight (see `close_gently`).

mod files;
mod request;
#[cfg(test)]
mod tests;

use std::{
    io::{self, BufReader, ErrorKind, Read, Write},
    net::{Shutdown, TcpListener, TcpStream},
    path::{Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

use files::{answer, response};
use request::read_request;

/// How long a kept-alive connection may wait for its next request before the
/// server closes it. Browsers close idle connections sooner themselves.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a closing connection keeps reading what the client still sends.
const LINGER: Duration = Duration::from_secs(2);

/// Binds 127.0.0.1:`port` (0 picks a free port).
pub fn bind(port: u16) -> Result<TcpListener> {
    TcpListener::bind(("127.0.0.1", port)).with_context(|| format!("binding 127.0.0.1:{port}"))
}

/// Serves files under `root` until the process ends; one thread per connection.
pub fn serve_forever(listener: TcpListener, root: PathBuf) -> Result<()> {
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(stream) => stream,
            // A connection the client gave up on before it was accepted.
            Err(error) if error.kind() == ErrorKind::ConnectionAborted => continue,
            // Out of file descriptors or memory: wait for connections to
            // close rather than spin on an accept that keeps failing.
            Err(_) => {
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let root = root.clone();
        // If no thread can be started, the connection is dropped (the client
        // sees it closed and may retry) and the server keeps accepting.
        let _ = thread::Builder::new()
            .name("serve-connection".into())
            .spawn(move || {
                let _ = serve_connection(stream, &root);
            });
    }
    Ok(())
}

/// Answers requests on one connection until the client closes it, asks to
/// close it, or stays idle past `IDLE_TIMEOUT`.
fn serve_connection(stream: TcpStream, root: &Path) -> io::Result<()> {
    stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
    // Each response goes out in one write; do not hold its last segment back.
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let request = match read_request(&mut reader) {
            Ok(Some(request)) => request,
            // The client closed the connection between requests.
            Ok(None) => return Ok(()),
            Err(error) if error.kind() == ErrorKind::InvalidData => {
                let response = response(
                    "400 Bad Request",
                    "text/plain; charset=utf-8",
                    b"bad request\n",
                    false,
                    false,
                );
                writer.write_all(&response)?;
                break;
            }
            // Idle past the timeout, or the connection failed.
            Err(error) => return Err(error),
        };
        let keep_alive = request.keep_alive && !request.has_body;
        writer.write_all(&answer(&request, root, keep_alive))?;
        if !keep_alive {
            break;
        }
    }
    close_gently(writer, reader);
    Ok(())
}

/// Closing a socket that still holds unread bytes from the client makes the
/// kernel send a reset, and a reset can make the client discard the end of a
/// response it has not read yet. So the server first says it will send no
/// more (a FIN after the response), then reads and drops whatever the client
/// still sends, until the client closes its side or `LINGER` passes.
fn close_gently(writer: TcpStream, mut reader: BufReader<TcpStream>) {
    if writer.shutdown(Shutdown::Write).is_err() {
        return;
    }
    let deadline = Instant::now() + LINGER;
    let mut sink = [0u8; 4096];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        if left.is_zero() || writer.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match reader.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}
