//! The doctor: probes a running HTTP/1.1 or HTTP/2 server, over plain TCP
//! or TLS, for the failures the book teaches (an idle connection behind a
//! balancer, slow clients, slow handlers, a blocked runtime, overload,
//! Retry-After, shutdown) and says pass, warn or fail for each, with the
//! number it measured and the chapter that explains it.
//!
//! The checks reuse the labs' own machinery: the keep-alive lab's idle
//! probe, the server-timeouts lab's stalled clients, the shutdown lab's
//! probe. The lab ([`lab`]) points the doctor at three servers: the stock
//! `axum::serve` service, the book's hardened service (both in
//! [`services`]), and a Node server where Node is installed.

pub mod checks;
pub mod compare;
pub mod duration;
pub mod expect;
pub mod finding;
pub mod h2;
pub mod lab;
pub mod options;
pub mod patient;
pub mod report;
pub mod services;
pub mod tls;
pub mod tool;
pub mod wild;

pub use crate::{
    finding::{Check, Finding, Grade},
    lab::Config,
    options::{Options, Target},
    report::Report,
};

/// The lab binary's `main`; `src/main.rs` only calls it. It lives in the
/// library because the binary crate is where generic code is compiled at
/// opt-level 3 a second time: with `main` in the binary, each lab's binary
/// took 8 to 24 s to compile; with it here, under half a second
/// (ARCHITECTURE.md, "Timings and build profiles").
pub fn main() -> std::process::ExitCode {
    lab_kit::cli::run_lab::<Config>()
}
