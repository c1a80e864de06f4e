//! Run with: `cargo xtask lab health-checks` (or `cargo run -p lab-health-checks -- --quick`).

use std::process::ExitCode;

fn main() -> ExitCode {
    lab_kit::cli::run_lab(include_str!("../Cargo.toml"), |mode, mut out| async move {
        let config = lab_health_checks::HealthConfig::for_mode(mode);
        lab_health_checks::run(mode, &config, &mut out).await
    })
}
