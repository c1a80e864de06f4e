//! Build script: bakes the compiler version and the versions of the HTTP crates
//! the workspace's own packages depend on (read from Cargo.lock) into the kit,
//! so every `meta` record can say exactly what it measured.

use std::{env, fs, path::PathBuf, process::Command};

// The parser is shared with the kit's unit tests, which run it on locks made up
// for the purpose.
#[path = "src/lockfile.rs"]
mod lockfile;

/// The crates whose versions decide the behaviour the labs measure.
const TRACKED: &[&str] = &[
    "axum",
    "hyper",
    "hyper-util",
    "reqwest",
    "tokio",
    "tower",
    "tower-http",
];

fn main() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|text| text.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=LAB_KIT_RUSTC={version}");

    let lock =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = fs::read_to_string(&lock).unwrap_or_default();
    let joined: Vec<String> = lockfile::linked_versions(&text, TRACKED)
        .into_iter()
        .map(|(name, version)| format!("{name}={version}"))
        .collect();
    println!("cargo:rustc-env=LAB_KIT_CRATES={}", joined.join(";"));
}
