//! Run with: `cargo xtask lab client-timeouts` (or `cargo run -p lab-client-timeouts -- --quick`),
//! or check any HTTP server with the two-phase timeout:
//! `cargo run -p lab-client-timeouts -- check --target 127.0.0.1:PORT`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    if arguments.first().map(String::as_str) == Some("check") {
        // A verdict on stdout and exit 0, or one error line and exit 2.
        return lab_kit::cli::run_subcommand(lab_client_timeouts::check::run_check(
            &arguments[1..],
        ));
    }
    lab_kit::cli::run_lab(
        include_str!("../Cargo.toml"),
        lab_client_timeouts::ClientTimeoutsConfig::for_mode,
        |mode, config, mut out| async move { lab_client_timeouts::run(mode, &config, &mut out).await },
    )
}
