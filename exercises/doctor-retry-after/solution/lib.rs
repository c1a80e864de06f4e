//! The solution: `Retry-After` is either delay-seconds, a whole number of
//! seconds written in digits ("2"), or an HTTP date (RFC 9110, section
//! 10.2.3). `{:?}` of a `Duration` is "1.5s", which is neither: a client
//! that reads the header finds nothing it can parse and retries on its own
//! schedule, often at once. The refusal rounds the wait up to whole seconds
//! (coming back early finds the backlog still there) and never says 0,
//! which would send every refused caller straight back together.

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
    // Whole seconds, rounded up, at least one.
    let rounded_up = come_back_in.as_secs() + u64::from(come_back_in.subsec_nanos() > 0);
    let seconds = rounded_up.max(1);
    let mut refused = (StatusCode::SERVICE_UNAVAILABLE, "busy\n").into_response();
    refused
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(seconds));
    refused
}

/// Counts a caller out when its request ends (also when it is cancelled).
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
