//! The toolchain that `rust-toolchain.toml` asks for, made whole before any
//! step needs it. rustup installs a toolchain file's targets and components
//! only when it installs the toolchain itself: on a machine where the pinned
//! toolchain is already present (a reader who built another project with it),
//! the wasm target for the widgets is simply missing and the build fails half
//! way. So the xtask checks the active sysroot first and, with rustup, adds
//! what is missing; without rustup it names what to install and stops.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::project::Project;
use lab_kit::exit::bad_input;

/// What `rust-toolchain.toml` lists.
#[derive(Debug, Default, Deserialize, PartialEq)]
pub struct Wanted {
    #[serde(default)]
    pub channel: String,
    #[serde(default)]
    pub components: Vec<String>,
    #[serde(default)]
    pub targets: Vec<String>,
}

#[derive(Deserialize)]
struct ToolchainFile {
    toolchain: Wanted,
}

impl Wanted {
    pub fn parse(text: &str) -> Result<Wanted> {
        let file: ToolchainFile = toml::from_str(text).context("reading [toolchain]")?;
        Ok(file.toolchain)
    }

    pub fn read(project: &Project) -> Result<Wanted> {
        let path = project.root.join("rust-toolchain.toml");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        Wanted::parse(&text).with_context(|| format!("in {}", path.display()))
    }
}

/// What the active toolchain lacks.
#[derive(Debug, Default, PartialEq)]
pub struct Missing {
    pub targets: Vec<String>,
    pub components: Vec<String>,
}

impl Missing {
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty() && self.components.is_empty()
    }

    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.targets.is_empty() {
            parts.push(format!("target {}", self.targets.join(", ")));
        }
        if !self.components.is_empty() {
            parts.push(format!("component {}", self.components.join(", ")));
        }
        parts.join(" and ")
    }
}

/// The files that show a component is installed in a sysroot. rustup and
/// distribution packages alike put the tools in `<sysroot>/bin`.
fn component_files(component: &str) -> &'static [&'static str] {
    match component {
        "rustfmt" => &["rustfmt", "cargo-fmt"],
        "clippy" => &["cargo-clippy", "clippy-driver"],
        "rust-src" => &["lib/rustlib/src/rust"],
        _ => &[],
    }
}

/// Compares what is wanted with what a sysroot holds.
pub fn missing_in(sysroot: &Path, wanted: &Wanted) -> Missing {
    let targets = wanted
        .targets
        .iter()
        .filter(|target| {
            !sysroot
                .join("lib/rustlib")
                .join(target)
                .join("lib")
                .is_dir()
        })
        .cloned()
        .collect();
    let components = wanted
        .components
        .iter()
        .filter(|component| {
            component_files(component).iter().any(|file| {
                let path = sysroot
                    .join(if file.contains('/') { "" } else { "bin" })
                    .join(file);
                !path.exists()
            })
        })
        .cloned()
        .collect();
    Missing {
        targets,
        components,
    }
}

/// The sysroot of the rustc that cargo uses here.
fn sysroot(project: &Project) -> Result<PathBuf> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .current_dir(&project.root)
        .output()
        .with_context(|| format!("running {} --print sysroot", rustc.to_string_lossy()))?;
    if !output.status.success() {
        bail!(
            "rustc --print sysroot failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim().to_string(),
    ))
}

/// The toolchain's clippy driver, a rustc that also runs clippy's lints
/// (`cargo clippy` runs cargo with it as the workspace's rustc).
pub fn clippy_driver(project: &Project) -> Result<PathBuf> {
    let driver = sysroot(project)?.join("bin").join("clippy-driver");
    if !driver.exists() {
        bail!(
            "{} is missing: the clippy component is not installed",
            driver.display()
        );
    }
    Ok(driver)
}

fn rustup_present() -> bool {
    Command::new("rustup")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Makes sure every target and component that rust-toolchain.toml lists is
/// installed in the active toolchain, installing it with rustup if needed.
pub fn ensure(project: &Project) -> Result<()> {
    let wanted = Wanted::read(project)?;
    let sysroot = sysroot(project)?;
    let missing = missing_in(&sysroot, &wanted);
    if missing.is_empty() {
        return Ok(());
    }
    if !rustup_present() {
        return Err(bad_input(format!(
            "this Rust toolchain ({}) lacks the {} that rust-toolchain.toml lists, and rustup \
             is not on PATH to add it: install it with your toolchain's installer \
             (with rustup: `rustup target add ...` / `rustup component add ...`)",
            sysroot.display(),
            missing.describe()
        )));
    }
    eprintln!(
        "toolchain: installing the {} for Rust {} (rust-toolchain.toml lists it; rustup adds \
         a toolchain file's targets and components only when it installs the toolchain)",
        missing.describe(),
        wanted.channel
    );
    let mut steps: Vec<Vec<&str>> = Vec::new();
    if !missing.targets.is_empty() {
        let mut add = vec!["target", "add"];
        add.extend(missing.targets.iter().map(String::as_str));
        steps.push(add);
    }
    if !missing.components.is_empty() {
        let mut add = vec!["component", "add"];
        add.extend(missing.components.iter().map(String::as_str));
        steps.push(add);
    }
    for arguments in steps {
        // Run in the project folder, so rustup acts on the toolchain the file pins.
        let status = Command::new("rustup")
            .args(&arguments)
            .current_dir(&project.root)
            .status()
            .context("running rustup")?;
        if !status.success() {
            bail!("`rustup {}` failed ({status})", arguments.join(" "));
        }
    }
    let still = missing_in(&sysroot, &wanted);
    if !still.is_empty() {
        bail!(
            "rustup ran, but {} still lacks the {}",
            sysroot.display(),
            still.describe()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_projects_toolchain_file_lists_the_wasm_target_and_the_lint_tools() {
        let wanted = Wanted::read(&Project::locate()).unwrap();
        assert!(
            wanted
                .targets
                .contains(&"wasm32-unknown-unknown".to_string())
        );
        for component in &wanted.components {
            assert!(
                !component_files(component).is_empty(),
                "no way to tell whether component {component} is installed"
            );
        }
    }

    #[test]
    fn a_sysroot_without_the_target_or_a_tool_is_reported_missing() {
        let root = std::env::temp_dir().join(format!("xtask-sysroot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::create_dir_all(root.join("lib/rustlib/x86_64-unknown-linux-gnu/lib")).unwrap();
        std::fs::write(root.join("bin/rustfmt"), "").unwrap();
        std::fs::write(root.join("bin/cargo-fmt"), "").unwrap();
        std::fs::write(root.join("bin/cargo-clippy"), "").unwrap();
        let wanted = Wanted::parse(
            "[toolchain]\nchannel = \"1.95.0\"\ncomponents = [\"rustfmt\", \"clippy\"]\n\
             targets = [\"wasm32-unknown-unknown\"]\n",
        )
        .unwrap();
        let missing = missing_in(&root, &wanted);
        assert_eq!(missing.targets, ["wasm32-unknown-unknown"]);
        // clippy-driver is absent, so clippy counts as missing.
        assert_eq!(missing.components, ["clippy"]);

        std::fs::write(root.join("bin/clippy-driver"), "").unwrap();
        std::fs::create_dir_all(root.join("lib/rustlib/wasm32-unknown-unknown/lib")).unwrap();
        assert!(missing_in(&root, &wanted).is_empty());
        let _ = std::fs::remove_dir_all(&root);
    }
}
