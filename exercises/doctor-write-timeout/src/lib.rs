//! # Exercise: a write timeout that never fires
//!
//! The doctor's slow-read check failed on this service: a client sent
//! requests and never read the answers, and the server kept the connection
//! (its buffers, its task) open for as long as the client liked. hyper has
//! a header read timeout but no write timeout, so the team wraps every
//! accepted connection in the lab kit's `HookedStream` with this hook: a
//! write that has waited `limit` for the client to make room should fail,
//! and the failed write ends the connection. The doctor still says "still
//! open".
//!
//! Verify: `cargo xtask exercise verify doctor-write-timeout`.

use std::{
    io,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use lab_kit::stream::StreamHook;

/// Fails a connection's write once it has waited `limit`.
pub struct WriteDeadline {
    limit: Duration,
    /// When the write that is waiting now first could not proceed.
    blocked_since: Option<Instant>,
}

impl WriteDeadline {
    pub fn new(limit: Duration) -> WriteDeadline {
        WriteDeadline {
            limit,
            blocked_since: None,
        }
    }
}

impl StreamHook for WriteDeadline {
    /// A write that cannot proceed: has it waited too long?
    fn write_blocked(&mut self, _context: &mut Context<'_>) -> Poll<io::Error> {
        // TODO: this looks at the clock each time the write is polled. After
        // it returns `Pending`, what polls it again when the client never
        // reads another byte, and what would have to wake it at `limit`?
        let since = *self.blocked_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= self.limit {
            Poll::Ready(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing for the write timeout",
            ))
        } else {
            Poll::Pending
        }
    }

    fn write_done(&mut self) {
        self.blocked_since = None;
    }
}
