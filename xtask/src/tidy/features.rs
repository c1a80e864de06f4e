//! One feature set for every command. Cargo unifies a shared crate's features
//! over the packages one invocation builds, and a crate with other features
//! is another artifact, compiled again: once, a tokio `test-util` in one
//! lab's dev-dependencies made `cargo test` rebuild tokio and every lab. Two
//! rules keep every command on the artifacts `cargo xtask book` built:
//!
//! - a member's manifest names each dependency as `name.workspace = true` (or
//!   a path in the workspace) and adds no features: features are declared
//!   once, in `[workspace.dependencies]`;
//! - the package sets the other commands build (the labs with every exercise,
//!   as `prepare` and `exercise verify` do; the whole workspace with its
//!   dev-dependencies, as `cargo xtask test` does) give every crate the labs'
//!   build also has the very features it has there. `cargo tree` says which.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result, bail};

use super::{Manifest, Problems};
use crate::project::Project;

/// Rule one: no member adds a feature or names a registry version.
pub(super) fn check_manifests(project: &Project, manifests: &[Manifest], problems: &mut Problems) {
    for (manifest, table) in manifests {
        let shown = manifest.strip_prefix(&project.root).unwrap_or(manifest);
        for problem in own_features(table) {
            problems.add(format!("{}: {problem}", shown.display()));
        }
    }
}

/// What a manifest declares that belongs in `[workspace.dependencies]`.
fn own_features(manifest: &toml::Table) -> Vec<String> {
    let mut found = Vec::new();
    for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
        let Some(table) = manifest.get(section).and_then(|table| table.as_table()) else {
            continue;
        };
        for (name, spec) in table {
            let spec = spec.as_table();
            let from_workspace = spec
                .and_then(|spec| spec.get("workspace"))
                .and_then(|workspace| workspace.as_bool())
                == Some(true);
            let path = spec.is_some_and(|spec| spec.contains_key("path"));
            let features = spec.is_some_and(|spec| spec.contains_key("features"));
            if !from_workspace && !path {
                found.push(format!(
                    "[{section}] {name} is not `{name}.workspace = true`: declare it, with its features, in the workspace's [workspace.dependencies]"
                ));
            } else if from_workspace && features {
                found.push(format!(
                    "[{section}] {name} adds features: declare them in [workspace.dependencies], so every command builds {name} with the same ones"
                ));
            }
        }
    }
    found
}

/// Rule two, asked of `cargo tree` (it resolves features as a build would).
pub(super) fn check_package_sets(project: &Project, problems: &mut Problems) -> Result<()> {
    let labs = crate::release::packages(project, &[])?;
    let base = resolved(project, &selection(&labs), false)?;
    let exercises: Vec<String> = crate::exercise::exercises(project)?
        .into_iter()
        .map(|exercise| exercise.name)
        .collect();
    let names: Vec<&str> = exercises.iter().map(String::as_str).collect();
    let with_exercises = crate::release::packages(project, &names)?;
    let workspace = ["--workspace", "--exclude", "xtask"].map(String::from);
    for (what, arguments, dev) in [
        (
            "the labs with the exercises (prepare, exercise verify)",
            selection(&with_exercises),
            false,
        ),
        (
            "the workspace's tests (cargo xtask test)",
            workspace.to_vec(),
            true,
        ),
    ] {
        let other = resolved(project, &arguments, dev)?;
        for problem in differences(&base, &other) {
            problems.add(format!(
                "{what} build {problem} than the labs' build does: the crate would be compiled again; declare the feature in [workspace.dependencies]"
            ));
        }
    }
    Ok(())
}

fn selection(packages: &[String]) -> Vec<String> {
    packages
        .iter()
        .flat_map(|package| ["--package".to_string(), package.clone()])
        .collect()
}

/// Each crate of the build (`name vX.Y.Z`, with ` (proc-macro)` for a
/// host crate) and the feature lists it is built with (one per variant).
type Resolved = BTreeMap<String, BTreeSet<String>>;

fn resolved(project: &Project, selection: &[String], dev: bool) -> Result<Resolved> {
    let edges = if dev {
        "normal,build,dev"
    } else {
        "normal,build"
    };
    let output = project
        .cargo()
        .args(["tree", "--edges", edges, "--prefix", "none"])
        .args(["--format", "{p}|{f}"])
        .args(selection)
        .output()
        .context("running cargo tree")?;
    if !output.status.success() {
        bail!(
            "cargo tree failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(parse_tree(&String::from_utf8_lossy(&output.stdout)))
}

fn parse_tree(text: &str) -> Resolved {
    let mut crates = Resolved::new();
    for line in text.lines() {
        let line = line.trim().trim_end_matches(" (*)");
        let Some((package, features)) = line.split_once('|') else {
            continue;
        };
        // Workspace members (`name v0.1.0 (/path)`) are ours, not shared
        // dependencies; their own features are the manifests' business.
        if package.contains(" (/") {
            continue;
        }
        crates
            .entry(package.to_string())
            .or_default()
            .insert(features.to_string());
    }
    crates
}

/// Crates both builds have that `other` builds with features `base` lacks.
fn differences(base: &Resolved, other: &Resolved) -> Vec<String> {
    other
        .iter()
        .filter_map(|(package, variants)| {
            let known = base.get(package)?;
            let new: Vec<&String> = variants.difference(known).collect();
            (!new.is_empty()).then(|| {
                format!(
                    "gives {package} the features [{}], other",
                    new.iter()
                        .map(|features| features.as_str())
                        .collect::<Vec<_>>()
                        .join("] [")
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_that_adds_a_feature_or_a_version_is_named() {
        let manifest: toml::Table = r#"
            [dependencies]
            kit = { path = "../kit", default-features = false }
            tokio.workspace = true
            tower = { workspace = true, features = ["load-shed"] }
            rayon = "1.11"
            [dev-dependencies]
            tokio = { workspace = true, features = ["test-util"] }
        "#
        .parse()
        .expect("a manifest");
        let found = own_features(&manifest);
        assert_eq!(found.len(), 3, "{found:#?}");
        assert!(found[0].starts_with("[dependencies] rayon is not `rayon.workspace = true`"));
        assert!(found[1].starts_with("[dependencies] tower adds features"));
        assert!(found[2].starts_with("[dev-dependencies] tokio adds features"));
    }

    #[test]
    fn a_shared_crate_with_other_features_is_a_difference_and_a_new_crate_is_not() {
        let base = parse_tree(
            "tokio v1.0.0|net,rt\nsyn v2.0.0 (proc-macro)|full (*)\nlab-kit v0.1.0 (/w/labs/kit)|runtime\n",
        );
        assert_eq!(base["syn v2.0.0 (proc-macro)"].len(), 1);
        assert!(!base.contains_key("lab-kit v0.1.0 (/w/labs/kit)"));
        let same = parse_tree("tokio v1.0.0|net,rt\nwasm-bindgen v0.2.0|std\n");
        assert!(differences(&base, &same).is_empty());
        let other = parse_tree("tokio v1.0.0|net,rt,test-util\n");
        assert_eq!(
            differences(&base, &other),
            ["gives tokio v1.0.0 the features [net,rt,test-util], other"]
        );
    }
}
