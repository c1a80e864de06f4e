//! `doctor HOST:PORT [CHECK...]`: probe your own service. See `doctor --help`.

fn main() -> std::process::ExitCode {
    lab_doctor::tool::main()
}
