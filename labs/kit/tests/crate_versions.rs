//! The crate versions every `meta` record names are the ones the labs call:
//! checked against `cargo metadata`, which resolves the workspace on its own,
//! without the kit's Cargo.lock reader.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::Command,
};

use lab_kit::machine::Machine;
use serde_json::Value;

/// For each crate name: the versions that the workspace's own packages
/// depend on directly, as `cargo metadata` resolves them.
fn versions_members_depend_on() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_string());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    // Only this machine's platform: then cargo needs only the packages a build
    // here has already downloaded, and can stay offline.
    let version = Command::new(&cargo)
        .arg("-vV")
        .output()
        .unwrap_or_else(|error| panic!("running {cargo} -vV: {error}"));
    let version = String::from_utf8_lossy(&version.stdout);
    let host = version
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .unwrap_or_else(|| panic!("no host line in cargo -vV: {version}"));
    let output = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .args(["--filter-platform", host])
        .arg("--manifest-path")
        .arg(&manifest)
        .output()
        .unwrap_or_else(|error| panic!("running {cargo} metadata: {error}"));
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let members: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .expect("workspace_members")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let packages: BTreeMap<&str, (&str, &str)> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter_map(|package| {
            Some((
                package["id"].as_str()?,
                (package["name"].as_str()?, package["version"].as_str()?),
            ))
        })
        .collect();
    let mut versions: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for node in metadata["resolve"]["nodes"]
        .as_array()
        .expect("resolve nodes")
    {
        if !members.contains(node["id"].as_str().expect("node id")) {
            continue;
        }
        for dependency in node["deps"].as_array().expect("deps") {
            let id = dependency["pkg"].as_str().expect("dependency id");
            let (name, version) = packages[id];
            versions
                .entry(name.to_string())
                .or_default()
                .insert(version.to_string());
        }
    }
    versions
}

#[test]
fn meta_names_the_versions_the_workspace_depends_on() {
    let recorded = Machine::collect().crates;
    let resolved = versions_members_depend_on();
    // The build script decides which crates it tracks (the HTTP stack the labs
    // measure); the machine test in the kit checks that list. Here every
    // version it recorded must be the one the workspace resolves.
    assert!(recorded.contains_key("hyper"), "{recorded:?}");
    for name in recorded.keys().map(String::as_str) {
        let expected: Vec<&str> = resolved
            .get(name)
            .unwrap_or_else(|| panic!("no workspace package depends on {name}"))
            .iter()
            .map(String::as_str)
            .collect();
        assert_eq!(
            recorded.get(name).map(String::as_str),
            Some(expected.join(", ").as_str()),
            "{name}: meta records {:?}, the workspace depends on {expected:?}",
            recorded.get(name)
        );
    }
}
