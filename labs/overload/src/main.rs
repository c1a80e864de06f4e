//! Run with: `cargo xtask lab overload` (or `cargo run --release -p lab-overload -- --quick`).

fn main() -> std::process::ExitCode {
    lab_overload::main()
}
