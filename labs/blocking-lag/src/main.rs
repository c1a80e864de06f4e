//! Run with: `cargo xtask lab blocking-lag` (or `cargo run -p lab-blocking-lag -- --quick`).
//!
//! The same binary is also the lab's external prober: the lab re-executes
//! itself as `lab-blocking-lag __prober --target ADDR ...` (see `prober`).

fn main() -> std::process::ExitCode {
    lab_blocking_lag::main()
}
