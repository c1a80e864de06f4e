//! Run with: `cargo xtask lab health-checks` (or `cargo run -p lab-health-checks -- --quick`).

fn main() -> std::process::ExitCode {
    lab_health_checks::main()
}
