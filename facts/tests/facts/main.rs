//! The book's library facts, one test each: every test runs the crate
//! Cargo.lock pins (or reads this machine's kernel) on 127.0.0.1 and asserts
//! one default that a page states. `book/facts.toml` maps each fact id the
//! book writes as `{{#fact id}}` to its test here (`module::test_name`), and
//! `cargo xtask tidy` refuses an id without an entry or an entry whose test
//! is not in this binary. An upgrade that changes a default fails the test
//! named beside the sentence that states it.
//!
//! Every test is bounded (`lab_facts::bounded`) and leaves nothing behind:
//! its servers and clients are dropped with it.

mod axum;
mod axum_accept;
mod hickory;
mod hyper;
mod hyper_util;
mod hyper_util_retry;
mod kernel;
mod kernel_listen;
mod pid_namespace;
mod ports;
mod procfs;
mod reqwest;
mod tokio;
mod tower;
mod tower_http;
