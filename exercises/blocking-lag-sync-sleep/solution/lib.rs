//! The solution: the lookup goes through the SDK's async client. Waiting
//! for inventory is then a parked task, not a parked thread: the worker
//! goes back to polling other tasks, so the runtime's timers stay on time
//! and eight lookups wait side by side instead of two at a time.
//! (`spawn_blocking` around the old client also frees the workers, at the
//! cost of a blocking-pool thread per call in flight.)

use std::time::Duration;

use blocking_lag_sync_sleep::inventory;

/// `GET /stock`: how many of `sku` are left.
pub async fn stock(sku: String, round_trip: Duration) -> String {
    let left = inventory::lookup(&sku, round_trip).await;
    format!("{sku}: {left} left\n")
}
