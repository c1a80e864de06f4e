//! # Exercise: a blocking client call inside an async handler
//!
//! `GET /stock` asks the inventory service how many items are left. The
//! inventory SDK has two clients, and the handler was written against the
//! older, synchronous one: it waits for the round trip (a quarter of a
//! second when inventory is busy) by blocking the calling thread. The
//! service runs on a tokio runtime with two worker threads.
//!
//! Verify: `cargo xtask exercise verify blocking-lag-sync-sleep`.

use std::time::Duration;

/// The inventory SDK, as far as this exercise needs it: one lookup that
/// takes `round_trip`, in the SDK's two flavours.
pub mod inventory {
    use std::time::Duration;

    /// The synchronous client: the calling thread sleeps until the answer
    /// is in (`std::thread::sleep` stands for a blocking socket read).
    pub fn lookup_blocking(sku: &str, round_trip: Duration) -> u32 {
        std::thread::sleep(round_trip);
        stock_of(sku)
    }

    /// The async client: the task waits, its thread runs other tasks.
    pub async fn lookup(sku: &str, round_trip: Duration) -> u32 {
        tokio::time::sleep(round_trip).await;
        stock_of(sku)
    }

    fn stock_of(sku: &str) -> u32 {
        sku.bytes().map(u32::from).sum::<u32>() % 100
    }
}

/// `GET /stock`: how many of `sku` are left.
pub async fn stock(sku: String, round_trip: Duration) -> String {
    // TODO: while inventory takes its time, what is this worker thread
    // doing, and what happens to the other tasks it was meant to poll?
    let left = inventory::lookup_blocking(&sku, round_trip);
    format!("{sku}: {left} left\n")
}
