//! # Exercise: a write timeout that never fires
//!
//! The doctor's slow-read check failed on this service: a client sent
//! requests and never read the answers, and the server kept the connection
//! (its buffers, its task) open for as long as the client liked. hyper has
//! a header read timeout but no write timeout, so the team wrapped every
//! accepted connection in this: a write that has waited `limit` for the
//! client to make room should fail, and the failed write ends the
//! connection. The doctor still says "still open".
//!
//! Verify: `cargo xtask exercise verify doctor-write-timeout`.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
};

/// A connection whose writes fail once one has waited `limit`.
pub struct WriteDeadline {
    stream: TcpStream,
    limit: Duration,
    /// When the write that is waiting now first could not proceed.
    blocked_since: Option<Instant>,
}

impl WriteDeadline {
    pub fn new(stream: TcpStream, limit: Duration) -> WriteDeadline {
        WriteDeadline {
            stream,
            limit,
            blocked_since: None,
        }
    }

    /// A write that cannot proceed: has it waited too long?
    fn pending_or_timed_out<T>(&mut self) -> Poll<io::Result<T>> {
        // TODO: this looks at the clock each time the write is polled. After
        // it returns `Pending`, what polls it again when the client never
        // reads another byte, and what would have to wake it at `limit`?
        let since = *self.blocked_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= self.limit {
            Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing for the write timeout",
            )))
        } else {
            Poll::Pending
        }
    }
}

impl AsyncRead for WriteDeadline {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(context, buffer)
    }
}

impl AsyncWrite for WriteDeadline {
    fn poll_write(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write(context, bytes) {
            Poll::Pending => self.pending_or_timed_out(),
            ready => {
                self.blocked_since = None;
                ready
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.stream).poll_flush(context) {
            Poll::Pending => self.pending_or_timed_out(),
            ready => {
                self.blocked_since = None;
                ready
            }
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(context)
    }
}
