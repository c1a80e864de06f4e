//! Run with: `cargo xtask lab conn-reuse` (or `cargo run -p lab-conn-reuse -- --quick`).

use std::process::ExitCode;

fn main() -> ExitCode {
    lab_kit::cli::run_lab(
        include_str!("../Cargo.toml"),
        lab_conn_reuse::ReuseConfig::for_mode,
        |mode, config, mut out| async move { lab_conn_reuse::run(mode, &config, &mut out).await },
    )
}
