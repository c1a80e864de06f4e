//! Run with: `cargo xtask lab server-timeouts` (or `cargo run -p lab-server-timeouts -- --quick`).

fn main() -> std::process::ExitCode {
    lab_server_timeouts::main()
}
