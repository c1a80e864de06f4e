//! The two-phase timeout: a deadline for the response head (time to first
//! byte) around `send()`, then an idle deadline for every body chunk. It is
//! the fix the chapter recommends, for clients and for the proxy alike.
//!
//! Both phases are timers on the *request*, started by the code that sends
//! it, so they fire the same on a fresh connection and on one the pool
//! handed back: nothing here depends on when or whether a socket connected.

use std::{
    fmt,
    pin::Pin,
    task::{Context, Poll, ready},
    time::Duration,
};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The two deadlines.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TwoPhase {
    /// From the start of `send()` (connect included) to the response head.
    pub ttfb: Duration,
    /// The longest gap allowed between two body chunks (and before the first).
    pub body_idle: Duration,
}

/// How a two-phase request failed.
#[derive(Debug)]
pub enum TwoPhaseError {
    /// No response head within the TTFB deadline.
    Ttfb(Duration),
    /// The body went quiet for longer than the idle deadline.
    BodyIdle(Duration),
    /// reqwest failed on its own (refused, reset, a timeout of its own).
    Http(reqwest::Error),
}

impl fmt::Display for TwoPhaseError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TwoPhaseError::Ttfb(limit) => write!(formatter, "no response head within {limit:?}"),
            TwoPhaseError::BodyIdle(limit) => {
                write!(formatter, "the response body was idle for {limit:?}")
            }
            TwoPhaseError::Http(error) => write!(formatter, "{error}"),
        }
    }
}

impl std::error::Error for TwoPhaseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TwoPhaseError::Http(error) => Some(error),
            _ => None,
        }
    }
}

// ANCHOR: two_phase
impl TwoPhase {
    /// Phase one: send the request and wait for the response head, for at
    /// most `ttfb`. When the deadline passes, the `send()` future is dropped,
    /// which cancels the request and closes its connection: a connection
    /// with a request outstanding on it can never go back to the pool.
    pub async fn send(
        &self,
        client: &reqwest::Client,
        request: reqwest::Request,
    ) -> Result<reqwest::Response, TwoPhaseError> {
        match tokio::time::timeout(self.ttfb, client.execute(request)).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(error)) => Err(TwoPhaseError::Http(error)),
            Err(_elapsed) => Err(TwoPhaseError::Ttfb(self.ttfb)),
        }
    }

    /// Phase two, one chunk: the next piece of the body, `None` at its end,
    /// or an error if nothing arrives for `body_idle`. The timer restarts
    /// with every chunk, so a long download that keeps moving is fine.
    pub async fn next_chunk(
        &self,
        response: &mut reqwest::Response,
    ) -> Result<Option<Bytes>, TwoPhaseError> {
        match tokio::time::timeout(self.body_idle, response.chunk()).await {
            Ok(Ok(chunk)) => Ok(chunk),
            Ok(Err(error)) => Err(TwoPhaseError::Http(error)),
            Err(_elapsed) => Err(TwoPhaseError::BodyIdle(self.body_idle)),
        }
    }

    /// Both phases: the whole body, or the first deadline that passed.
    pub async fn fetch(
        &self,
        client: &reqwest::Client,
        request: reqwest::Request,
    ) -> Result<(reqwest::StatusCode, Vec<u8>), TwoPhaseError> {
        let mut response = self.send(client, request).await?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(chunk) = self.next_chunk(&mut response).await? {
            body.extend_from_slice(&chunk);
        }
        Ok((status, body))
    }
}
// ANCHOR_END: two_phase

// ANCHOR: idle_body
/// A body that fails if its inner body produces no frame for `idle`: what a
/// proxy streams to its client, so a stalled upstream body ends the client's
/// response with an error (the connection is closed before the body is
/// complete) instead of leaving it hanging. Dropping it drops the upstream
/// body, which closes the upstream connection.
pub struct IdleTimeoutBody<B> {
    inner: Pin<Box<B>>,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl<B> IdleTimeoutBody<B> {
    pub fn new(inner: B, idle: Duration) -> IdleTimeoutBody<B> {
        IdleTimeoutBody {
            inner: Box::pin(inner),
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
        }
    }
}

impl<B> Body for IdleTimeoutBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = self.inner.as_mut().poll_frame(context) {
            // Something arrived: the idle clock starts again.
            let next = Instant::now() + self.idle;
            self.deadline.as_mut().reset(next);
            return Poll::Ready(frame.map(|result| result.map_err(Into::into)));
        }
        ready!(self.deadline.as_mut().poll(context));
        let idle = self.idle;
        Poll::Ready(Some(Err(TwoPhaseError::BodyIdle(idle).to_string().into())))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
// ANCHOR_END: idle_body
