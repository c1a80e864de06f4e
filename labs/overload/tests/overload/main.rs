//! The overload lab's tests, one binary: each module was a test file of its
//! own, and each test binary links the whole HTTP stack, so one binary per
//! crate keeps `cargo xtask test` from spending its time linking.

mod breakers;
mod bulkhead;
mod enrichment;
mod guard;
mod health_probe;
mod placement;
mod shedding;
mod storm;
mod tower_limits;

/// Held by the tests that must not overlap: the storm runs in real time and
/// its timeline is the load, and the enrichment batch opens twelve hundred
/// connections at once (the lab runs them apart too). A tokio mutex, since
/// it is held across awaits, and each test has a runtime of its own.
pub static APART: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
