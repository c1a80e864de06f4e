//! The solution: a timer the runtime wakes the task with. When a write
//! cannot proceed, the wrapper arms a `Sleep` of `limit` (once per blocked
//! write, kept across polls) and polls it, which registers the task's waker
//! with the runtime's timer as well as with the socket: whichever comes
//! first, room in the socket or the deadline, polls the write again. Past
//! the deadline the write fails, and hyper ends the connection. A write
//! that makes progress disarms the timer, so a client that reads slowly but
//! steadily is never cut off.

use std::{
    future::Future,
    io,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    time::Sleep,
};

/// A connection whose writes fail once one has waited `limit`.
pub struct WriteDeadline {
    stream: TcpStream,
    limit: Duration,
    /// The deadline of the write that is waiting now.
    waiting: Option<Pin<Box<Sleep>>>,
}

impl WriteDeadline {
    pub fn new(stream: TcpStream, limit: Duration) -> WriteDeadline {
        WriteDeadline {
            stream,
            limit,
            waiting: None,
        }
    }

    /// A write that cannot proceed: arm the timer (once) and poll it, so
    /// that the runtime wakes this task at the deadline.
    fn pending_or_timed_out<T>(&mut self, context: &mut Context<'_>) -> Poll<io::Result<T>> {
        let limit = self.limit;
        let timer = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(context) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing for the write timeout",
            ))),
            Poll::Pending => Poll::Pending,
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
            Poll::Pending => self.pending_or_timed_out(context),
            ready => {
                self.waiting = None;
                ready
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.stream).poll_flush(context) {
            Poll::Pending => self.pending_or_timed_out(context),
            ready => {
                self.waiting = None;
                ready
            }
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(context)
    }
}
