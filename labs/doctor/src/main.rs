//! Run with: `cargo xtask lab doctor` (or `cargo run -p lab-doctor -- --quick`).
//! `lab-doctor serve stock-axum|hardened --port P [--scale S]` runs one of
//! the services the lab points the doctor at; the doctor itself is the
//! `doctor` binary.

fn main() -> std::process::ExitCode {
    lab_doctor::main()
}
