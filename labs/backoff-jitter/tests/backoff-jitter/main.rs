//! The backoff-jitter lab's tests, one binary: each module was a test file of its
//! own, and each test binary links the whole HTTP stack, so one binary per
//! crate keeps `cargo xtask test` from spending its time linking.

mod cap;
mod deadline;
mod errors;
mod policy;
mod quick;
