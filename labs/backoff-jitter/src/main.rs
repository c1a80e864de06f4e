//! Run with: `cargo xtask lab backoff-jitter` (or `cargo run -p lab-backoff-jitter -- --quick`).

use std::process::ExitCode;

fn main() -> ExitCode {
    lab_kit::cli::run_lab(include_str!("../Cargo.toml"), |mode, mut out| async move {
        let config = lab_backoff_jitter::BackoffConfig::for_mode(mode);
        lab_backoff_jitter::run(mode, &config, &mut out).await
    })
}
