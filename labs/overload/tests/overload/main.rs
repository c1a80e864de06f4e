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
