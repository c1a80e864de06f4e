//! Run with: `cargo xtask lab conn-reuse` (or `cargo run -p lab-conn-reuse -- --quick`).

use std::process::ExitCode;

fn main() -> ExitCode {
    lab_kit::cli::run_lab(include_str!("../Cargo.toml"), |mode, mut out| async move {
        let config = lab_conn_reuse::ReuseConfig::for_mode(mode);
        lab_conn_reuse::run(mode, &config, &mut out).await
    })
}
