//! Run with: `cargo xtask lab backoff-jitter` (or `cargo run -p lab-backoff-jitter -- --quick`).

fn main() -> std::process::ExitCode {
    lab_backoff_jitter::main()
}
