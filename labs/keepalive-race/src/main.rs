//! Run with: `cargo xtask lab keepalive-race` (or `cargo run -p lab-keepalive-race -- --quick`),
//! or probe any HTTP/1.1 server: `cargo run -p lab-keepalive-race -- probe --target 127.0.0.1:PORT`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    if arguments.first().map(String::as_str) == Some("probe") {
        // A verdict on stdout and exit 0, or one error line and exit 2.
        return lab_kit::cli::run_subcommand(lab_keepalive_race::probe::run_probe(&arguments[1..]));
    }
    lab_kit::cli::run_lab(
        include_str!("../Cargo.toml"),
        lab_keepalive_race::KeepaliveConfig::for_mode,
        |mode, config, mut out| async move { lab_keepalive_race::run(mode, &config, &mut out).await },
    )
}
