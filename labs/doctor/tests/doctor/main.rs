//! The doctor lab's tests, one binary: each module was a test file of its
//! own, and each test binary links the whole HTTP stack, so one binary per
//! crate keeps `cargo xtask test` from spending its time linking.

mod doctor;
mod expect;
mod h2;
mod nginx_tls;
mod no_write_timeout;
mod slowhttptest;
mod tls;
mod units;
mod wild;
