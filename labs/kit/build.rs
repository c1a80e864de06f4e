//! Build script: bakes the compiler version and the versions of the HTTP crates
//! from the workspace's Cargo.lock into the kit, so every `meta` record can say
//! exactly what it measured.

use std::{env, fs, path::PathBuf, process::Command};

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
    let mut found = Vec::new();
    let mut name: Option<&str> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("name = ") {
            name = Some(rest.trim_matches('"'));
        } else if let (Some(current), Some(rest)) = (name, line.strip_prefix("version = ")) {
            // Several versions of one crate can be locked (tower-http is); keep the newest listed.
            if TRACKED.contains(&current) {
                found.retain(|(known, _): &(&str, &str)| *known != current);
                found.push((current, rest.trim_matches('"')));
            }
            name = None;
        }
    }
    let joined: Vec<String> = found.iter().map(|(n, v)| format!("{n}={v}")).collect();
    println!("cargo:rustc-env=LAB_KIT_CRATES={}", joined.join(","));
}
