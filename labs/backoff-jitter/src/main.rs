//! Run with: `cargo xtask lab backoff-jitter` (or `cargo run -p lab-backoff-jitter -- --quick`).

use std::process::ExitCode;

fn main() -> ExitCode {
    lab_kit::cli::run_lab(
        include_str!("../Cargo.toml"),
        lab_backoff_jitter::BackoffConfig::for_mode,
        |mode, config, mut out| async move { lab_backoff_jitter::run(mode, &config, &mut out).await },
    )
}
