//! `cargo xtask doctor <target> [checks...]`: builds the doctor (labs/doctor,
//! the `doctor` binary) in release, as the labs are built, and runs it with
//! the words as they were typed. Its exit code is the doctor's: 0 clean,
//! 1 findings, 2 could not probe; a build that fails is 2 as well.

use std::{
    process::{Command, ExitCode, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail};

use lab_kit::exit::Exit;

use crate::{project::Project, release};

/// A backstop far above the doctor's own bounds (a minute by default, plus
/// a shutdown's grace period with a command).
const KILL_AFTER: Duration = Duration::from_secs(15 * 60);

pub fn run(project: &Project, arguments: &[String]) -> ExitCode {
    match build(project).and_then(|()| probe(project, arguments)) {
        Ok(code) => Exit::passed_on(code),
        Err(error) => lab_kit::exit::exit_code(crate::PROGRAM, Err(error)),
    }
}

/// The doctor's binary comes with its lab, in the one release build every
/// command shares (see `release`): after `cargo xtask book` nothing compiles.
fn build(project: &Project) -> Result<()> {
    release::build(project, &[]).context("the doctor does not build")
}

/// The doctor's exit code; `None` if a signal killed it.
fn probe(project: &Project, arguments: &[String]) -> Result<Option<i32>> {
    let exe = project.cargo_target().join("release").join("doctor");
    let mut command = Command::new(&exe);
    command.args(arguments).stdin(Stdio::null());
    lab_kit::process::own_group_killed_with_parent(&mut command);
    let mut child = command
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    match lab_kit::process::wait_or_kill_group(&mut child, KILL_AFTER, Duration::from_millis(50))? {
        // A doctor killed by a signal could not finish its probe: exit 2.
        Some(status) => Ok(status.code()),
        None => bail!("the doctor ran past {} s; stopped it", KILL_AFTER.as_secs()),
    }
}
