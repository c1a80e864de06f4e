//! Run with: `cargo xtask lab blocking-lag` (or `cargo run -p lab-blocking-lag -- --quick`).
//!
//! The same binary is also the lab's external prober: the lab re-executes
//! itself as `lab-blocking-lag __prober --target ADDR ...` (see `prober`).

use std::process::ExitCode;

use lab_blocking_lag::prober;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(prober::SUBCOMMAND) {
        return prober::prober_main(&args[2..]);
    }
    lab_kit::cli::run_lab(
        include_str!("../Cargo.toml"),
        |mode| lab_blocking_lag::BlockingConfig::for_mode(mode, lab_blocking_lag::this_binary()),
        |mode, config, mut out| async move { lab_blocking_lag::run(mode, &config, &mut out).await },
    )
}
