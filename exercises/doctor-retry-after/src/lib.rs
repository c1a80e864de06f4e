//! # Exercise: a 503 that says when to come back, in words no client reads
//!
//! The work route holds one of four database slots for about 100 ms. When
//! more than four callers are already waiting for a slot, it sheds: it
//! answers 503 at once and tells the caller to come back in about 1.5 s,
//! when the backlog has cleared. The doctor's overload check passes; its
//! Retry-After check does not.
//!
//! Verify: `cargo xtask exercise verify doctor-retry-after`.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    extract::State,
    http::{HeaderValue, StatusCode, header::RETRY_AFTER},
    response::{IntoResponse, Response},
};
use tokio::sync::Semaphore;

pub const SLOTS: usize = 4;
/// Callers that may wait for a slot; past them the route sheds.
pub const QUEUE_LIMIT: usize = 4;
/// How long a request holds its slot.
pub const HOLD: Duration = Duration::from_millis(100);
/// When a refused caller should come back: the backlog has cleared by then.
pub const COME_BACK_IN: Duration = Duration::from_millis(1500);

/// The route's slots, and how many callers hold or wait for one.
pub struct WorkPool {
    slots: Semaphore,
    wanting: AtomicUsize,
}

impl WorkPool {
    pub fn new() -> Arc<WorkPool> {
        Arc::new(WorkPool {
            slots: Semaphore::new(SLOTS),
            wanting: AtomicUsize::new(0),
        })
    }
}

/// `GET /work`: a slot, or a refusal when too many already wait.
pub async fn work(State(pool): State<Arc<WorkPool>>) -> Response {
    let wanting = pool.wanting.fetch_add(1, Ordering::SeqCst) + 1;
    let _leave = Leave(&pool.wanting);
    if wanting > SLOTS + QUEUE_LIMIT {
        return refusal(COME_BACK_IN);
    }
    let Ok(_slot) = pool.slots.acquire().await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    tokio::time::sleep(HOLD).await;
    "done\n".into_response()
}

/// The answer to a caller the route cannot take: 503, and when to come back.
pub fn refusal(come_back_in: Duration) -> Response {
    // TODO: what does this header say on the wire, and what does a client
    // that reads Retry-After (RFC 9110, section 10.2.3) accept there?
    let when = format!("{come_back_in:?}");
    let mut refused = (StatusCode::SERVICE_UNAVAILABLE, "busy\n").into_response();
    if let Ok(value) = HeaderValue::from_str(&when) {
        refused.headers_mut().insert(RETRY_AFTER, value);
    }
    refused
}

/// Counts a caller out when its request ends (also when it is cancelled).
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
