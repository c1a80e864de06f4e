//! The solution: a bulkhead per provider. Each provider gets its own share
//! of the slots, so a provider that hangs can hold only its own; and a call
//! that finds its share full is refused at once (`try_acquire`) instead of
//! queueing behind calls that will time out. The prices page never notices
//! the reviews outage, and the reviews page fails fast.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The slots for calls to each provider: `[prices, reviews]`.
pub type Slots = [Arc<Semaphore>; 2];

/// Half of `total` for each provider: one compartment each.
pub fn slots(total: usize) -> Slots {
    [(); 2].map(|()| Arc::new(Semaphore::new(total / 2)))
}

/// A slot for one call to provider `which`, now or never.
pub async fn slot(slots: Slots, which: usize) -> Option<OwnedSemaphorePermit> {
    slots[which].clone().try_acquire_owned().ok()
}
