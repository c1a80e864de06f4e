//! Run with: `cargo xtask lab health-checks` (or `cargo run -p lab-health-checks -- --quick`).

use std::process::ExitCode;

fn main() -> ExitCode {
    lab_kit::cli::run_lab(
        include_str!("../Cargo.toml"),
        lab_health_checks::HealthConfig::for_mode,
        |mode, config, mut out| async move { lab_health_checks::run(mode, &config, &mut out).await },
    )
}
