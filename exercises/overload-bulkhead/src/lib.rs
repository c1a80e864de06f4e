//! # Exercise: one pool of slots for a fast and a hanging provider
//!
//! The service calls two providers: prices (fast, 10 ms) and reviews
//! (usually fast too). Calls go out through a bounded pool of slots so the
//! service never has more than `total` calls in flight. Today the reviews
//! provider hangs until the call times out, and the price page, which never
//! touches reviews, goes from 10 ms to a second.
//!
//! Verify: `cargo xtask exercise verify overload-bulkhead`.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The slots for calls to each provider: `[prices, reviews]`.
pub type Slots = [Arc<Semaphore>; 2];

/// The slots the service starts with, `total` calls in flight at most.
pub fn slots(total: usize) -> Slots {
    // TODO: when every call to reviews hangs, who holds these slots, and
    // who waits for them? How should the slots be split, and what should a
    // call do when its provider's share is full?
    let pool = Arc::new(Semaphore::new(total));
    [Arc::clone(&pool), pool]
}

/// A slot for one call to provider `which` (`None`: go without the call).
pub async fn slot(slots: Slots, which: usize) -> Option<OwnedSemaphorePermit> {
    Arc::clone(&slots[which]).acquire_owned().await.ok()
}
