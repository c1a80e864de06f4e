//! Run with: `cargo xtask lab cancellation` (or `cargo run --release -p lab-cancellation -- --quick`).

use std::process::ExitCode;

fn main() -> ExitCode {
    lab_kit::cli::run_lab(
        include_str!("../Cargo.toml"),
        lab_cancellation::CancellationConfig::for_mode,
        |mode, config, mut out| async move { lab_cancellation::run(mode, &config, &mut out).await },
    )
}
