//! Run with: `cargo xtask lab shutdown-drain` (or `cargo run -p lab-shutdown-drain -- --quick`).
//!
//! Also: `lab-shutdown-drain probe --port P -- <command...>` probes any
//! server's shutdown, and `__server` is the server the lab runs as a child.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        // 0 clean, 1 a problem found, 2 could not probe (one error line).
        Some("probe") => ExitCode::from(lab_shutdown_drain::probe::probe_main(&args[1..])),
        Some("__server") => match lab_shutdown_drain::server::server_main(&args[1..]) {
            // `process::exit`, not a return: a server that hit its deadline
            // must not wait for the tasks it gave up on.
            Ok(code) => std::process::exit(code),
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::from(2)
            }
        },
        _ => lab_kit::cli::run_lab(
            include_str!("../Cargo.toml"),
            lab_shutdown_drain::ShutdownConfig::for_mode,
            |mode, config, mut out| async move {
                lab_shutdown_drain::run(mode, &config, &mut out).await
            },
        ),
    }
}
