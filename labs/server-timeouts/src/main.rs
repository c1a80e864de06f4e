//! Run with: `cargo xtask lab server-timeouts` (or `cargo run -p lab-server-timeouts -- --quick`).

use std::process::ExitCode;

fn main() -> ExitCode {
    lab_kit::cli::run_lab(
        include_str!("../Cargo.toml"),
        lab_server_timeouts::ServerTimeoutsConfig::for_mode,
        |mode, config, mut out| async move { lab_server_timeouts::run(mode, &config, &mut out).await },
    )
}
