//! The server-timeouts lab's tests, one binary: each module was a test file of its
//! own, and each test binary links the whole HTTP stack, so one binary per
//! crate keeps `cargo xtask test` from spending its time linking.

mod buffering;
mod descriptors;
mod handler_deadline;
mod hyper_timer;
mod stalled_clients;
