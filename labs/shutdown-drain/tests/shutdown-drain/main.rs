//! The shutdown-drain lab's tests, one binary: each module was a test file of its
//! own, and each test binary links the whole HTTP stack, so one binary per
//! crate keeps `cargo xtask test` from spending its time linking.

mod blocked;
mod deploys;
mod idle_close;
mod pid_one;
mod probe;
mod quick_run;
