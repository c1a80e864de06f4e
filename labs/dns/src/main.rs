//! Run with: `cargo xtask lab dns` (or `cargo run --release -p lab-dns -- --quick`).

use std::process::ExitCode;

fn main() -> ExitCode {
    lab_kit::cli::run_lab(
        include_str!("../Cargo.toml"),
        lab_dns::DnsConfig::for_mode,
        |mode, config, mut out| async move { lab_dns::run(mode, &config, &mut out).await },
    )
}
