//! The solution: a timer the runtime wakes the task with. When a write
//! cannot proceed, the hook arms a `Sleep` of `limit` (once per blocked
//! write, kept across polls) and polls it, which registers the task's waker
//! with the runtime's timer as well as with the socket: whichever comes
//! first, room in the socket or the deadline, polls the write again. Past
//! the deadline the write fails, and hyper ends the connection. A write
//! that finishes disarms the timer, so a client that reads slowly but
//! steadily is never cut off. (The doctor's hardened service keeps one
//! timer per connection and resets it instead, which saves an allocation
//! per stall.)

use std::{
    future::Future,
    io,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use lab_kit::stream::StreamHook;
use tokio::time::Sleep;

/// Fails a connection's write once it has waited `limit`.
pub struct WriteDeadline {
    limit: Duration,
    /// The deadline of the write that is waiting now.
    waiting: Option<Pin<Box<Sleep>>>,
}

impl WriteDeadline {
    pub fn new(limit: Duration) -> WriteDeadline {
        WriteDeadline {
            limit,
            waiting: None,
        }
    }
}

impl StreamHook for WriteDeadline {
    /// A write that cannot proceed: arm the timer (once) and poll it, so
    /// that the runtime wakes this task at the deadline.
    fn write_blocked(&mut self, context: &mut Context<'_>) -> Poll<io::Error> {
        let limit = self.limit;
        let timer = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(context) {
            Poll::Ready(()) => Poll::Ready(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing for the write timeout",
            )),
            Poll::Pending => Poll::Pending,
        }
    }

    fn write_done(&mut self) {
        self.waiting = None;
    }
}
