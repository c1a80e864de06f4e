//! The cancellation lab's tests, one binary: each module was a test file of its
//! own, and each test binary links the whole HTTP stack, so one binary per
//! crate keeps `cargo xtask test` from spending its time linking.

mod cancel_safety;
mod chain;
mod counting;
mod idempotency;
mod killed;
mod leave;
mod provider;
mod route;
mod spiral;
mod units;
