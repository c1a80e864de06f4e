//! Run with: `cargo xtask lab keepalive-race` (or `cargo run -p lab-keepalive-race -- --quick`),
//! or probe any HTTP/1.1 server: `cargo run -p lab-keepalive-race -- probe --target 127.0.0.1:PORT`.

use std::process::ExitCode;

use anyhow::Context;

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    if arguments.first().map(String::as_str) == Some("probe") {
        return probe_main(&arguments[1..]);
    }
    lab_kit::cli::run_lab(include_str!("../Cargo.toml"), |mode, mut out| async move {
        let config = lab_keepalive_race::Config::for_mode(mode);
        lab_keepalive_race::run(mode, &config, &mut out).await
    })
}

/// The `probe` subcommand: a verdict on stdout and exit 0, or one error line
/// on stderr and exit 2. Its own time bound is in `probe::run_probe`.
fn probe_main(arguments: &[String]) -> ExitCode {
    let outcome = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")
        .and_then(|runtime| runtime.block_on(lab_keepalive_race::probe::run_probe(arguments)));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}
