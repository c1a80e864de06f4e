//! The one release build every command shares. Cargo unifies the features of
//! a shared crate (tokio, hyper, tower, ...) over the packages one invocation
//! builds, and a crate built with other features is another artifact,
//! compiled again. So every command that builds native code in release
//! builds every lab, plus what it needs on top (an exercise, the doctor's
//! binary comes with its lab): the labs' set is the widest, every feature is
//! declared once in `[workspace.dependencies]`, and the exercises and the
//! tests add no feature to a crate the labs build (tidy's `features` check
//! asks `cargo tree` for each set). After `cargo xtask book`, `exercise
//! verify`, `doctor`, `prepare` and `test` compile no dependency again.

use anyhow::{Result, bail};

use crate::{project::Project, steps};

/// `cargo build --release` of every lab and of `extra` packages, with cargo's
/// own progress on screen (never `--quiet`: the first build of a package
/// takes minutes) and a heartbeat line in a log.
pub fn build(project: &Project, extra: &[&str]) -> Result<()> {
    let mut build = project.cargo();
    build.args(["build", "--release"]);
    for package in packages(project, extra)? {
        build.args(["--package", &package]);
    }
    let what = match extra {
        [] => "cargo build --release (the labs)".to_string(),
        [one] => format!("cargo build --release (the labs and {one})"),
        more => format!("cargo build --release (the labs and {} more)", more.len()),
    };
    let status = steps::status_with_heartbeat(&mut build, &what)?;
    if !status.success() {
        bail!("{what} failed ({status}): the compiler's message is above");
    }
    Ok(())
}

/// Every lab's package, then `extra`: the package set of [`build`], which
/// tidy's feature check compares too.
pub fn packages(project: &Project, extra: &[&str]) -> Result<Vec<String>> {
    let mut packages: Vec<String> = project.labs()?.into_iter().map(|lab| lab.package).collect();
    packages.extend(extra.iter().map(|package| package.to_string()));
    Ok(packages)
}
