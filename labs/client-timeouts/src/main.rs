//! Run with: `cargo xtask lab client-timeouts` (or `cargo run -p lab-client-timeouts -- --quick`),
//! or check any HTTP server with the two-phase timeout:
//! `cargo run -p lab-client-timeouts -- check --target 127.0.0.1:PORT`.

fn main() -> std::process::ExitCode {
    lab_client_timeouts::main()
}
