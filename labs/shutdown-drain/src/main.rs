//! Run with: `cargo xtask lab shutdown-drain` (or `cargo run -p lab-shutdown-drain -- --quick`).
//!
//! Also: `lab-shutdown-drain probe --port P -- <command...>` probes any
//! server's shutdown, and `__server` is the server the lab runs as a child.

fn main() -> std::process::ExitCode {
    lab_shutdown_drain::main()
}
