//! Run with: `cargo xtask lab keepalive-race` (or `cargo run -p lab-keepalive-race -- --quick`),
//! or probe any HTTP/1.1 server: `cargo run -p lab-keepalive-race -- probe --target 127.0.0.1:PORT`.

fn main() -> std::process::ExitCode {
    lab_keepalive_race::main()
}
