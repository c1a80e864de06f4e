//! Run with: `cargo xtask lab dns` (or `cargo run --release -p lab-dns -- --quick`).

fn main() -> std::process::ExitCode {
    lab_dns::main()
}
