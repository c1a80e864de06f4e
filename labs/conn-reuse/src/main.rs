//! Run with: `cargo xtask lab conn-reuse` (or `cargo run -p lab-conn-reuse -- --quick`).

fn main() -> std::process::ExitCode {
    lab_conn_reuse::main()
}
