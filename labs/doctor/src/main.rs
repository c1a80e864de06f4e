//! Run with: `cargo xtask lab doctor` (or `cargo run -p lab-doctor -- --quick`).
//! `lab-doctor serve stock-axum|hardened --port P [--scale S]` runs one of
//! the services the lab points the doctor at; the doctor itself is the
//! `doctor` binary.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("serve") {
        return match lab_doctor::services::serve_main(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::from(2)
            }
        };
    }
    lab_kit::cli::run_lab(
        include_str!("../Cargo.toml"),
        lab_doctor::DoctorConfig::for_mode,
        |mode, config, mut out| async move { lab_doctor::run(mode, &config, &mut out).await },
    )
}
