//! Run with: `cargo xtask lab client-timeouts` (or `cargo run -p lab-client-timeouts -- --quick`),
//! or check any HTTP server with the two-phase timeout:
//! `cargo run -p lab-client-timeouts -- check --target 127.0.0.1:PORT`.

use std::process::ExitCode;

use anyhow::Context;

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    if arguments.first().map(String::as_str) == Some("check") {
        return check_main(&arguments[1..]);
    }
    lab_kit::cli::run_lab(include_str!("../Cargo.toml"), |mode, mut out| async move {
        let config = lab_client_timeouts::Config::for_mode(mode);
        lab_client_timeouts::run(mode, &config, &mut out).await
    })
}

/// The `check` subcommand: a verdict on stdout and exit 0, or one error line
/// on stderr and exit 2. Its own time bound is in `check::run_check`.
fn check_main(arguments: &[String]) -> ExitCode {
    let outcome = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")
        .and_then(|runtime| runtime.block_on(lab_client_timeouts::check::run_check(arguments)));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}
