//! Run with: `cargo xtask lab cancellation` (or `cargo run --release -p lab-cancellation -- --quick`).

fn main() -> std::process::ExitCode {
    lab_cancellation::main()
}
