//! The one crate every lab shares: the records a lab prints, what it says about
//! the machine it ran on, loopback servers that count their connections, the
//! small statistics the charts need, and the plumbing of labs that run a
//! second process (a guarded child, one clock for both, `--flag value` pairs).
//!
//! A lab is a program that prints JSON Lines to stdout (see [`record`]) and its
//! progress to stderr. A lab's `Config` implements [`Lab`], and
//! [`cli::run_lab`] is the `main` every lab uses.

pub mod batch;
pub mod binary;
#[cfg(feature = "runtime")]
pub mod child;
pub mod cli;
#[cfg(feature = "runtime")]
pub mod client;
pub mod clock;
#[cfg(feature = "runtime")]
pub mod concurrently;
#[cfg(feature = "runtime")]
pub mod conn;
pub mod exit;
#[cfg(feature = "runtime")]
pub mod fetch;
pub mod flags;
pub mod gauge;
pub mod lab;
#[cfg(feature = "runtime")]
pub mod listener;
// Compiled into the build script too; the xtask's "How we know" appendix
// reads the versions the facts ran against with it.
pub mod lockfile;
pub mod machine;
pub mod manifest;
pub mod mode;
#[cfg(feature = "runtime")]
pub mod net;
#[cfg(feature = "runtime")]
pub mod nginx;
pub mod output;
#[cfg(feature = "runtime")]
pub mod ports;
pub mod process;
pub mod procnet;
pub mod record;
pub mod series;
#[cfg(feature = "runtime")]
pub mod server;
pub mod settings;
pub mod stats;
#[cfg(feature = "runtime")]
pub mod stream;
pub mod time;

pub use lab::Lab;
pub use mode::Mode;

/// Set (to anything) in a test's environment when it may take long in real
/// time: `cargo xtask test` sets it for the tests a manifest names under
/// `[package.metadata.tests.background-tests]`, which it runs in the
/// background. Without it such a test says it was skipped and returns, so a
/// plain `cargo test` stays short.
pub const REAL_TIME: &str = "LAB_REAL_TIME";
pub use output::Output;
pub use record::{Fields, Meta, Point, Record, Series, Value};
pub use settings::Settings;

/// The slug of the lab this is expanded in (its folder, chapter, data file
/// and charts): its package name, `lab-<slug>`, without the prefix. The
/// package name is the one place a lab's slug is written.
#[macro_export]
macro_rules! slug {
    () => {
        $crate::manifest::slug_of(env!("CARGO_PKG_NAME"))
    };
}
