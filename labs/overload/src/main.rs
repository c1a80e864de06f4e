//! Run with: `cargo xtask lab overload` (or `cargo run --release -p lab-overload -- --quick`).

use std::process::ExitCode;

fn main() -> ExitCode {
    lab_kit::cli::run_lab(
        include_str!("../Cargo.toml"),
        lab_overload::OverloadConfig::for_mode,
        |mode, config, mut out| async move { lab_overload::run(mode, &config, &mut out).await },
    )
}
