//! `cargo xtask test`'s check of every exercise: as shipped its check must
//! fail, naming what it measured, and with its solution it must pass. This is
//! the proof that no check is one that cannot fail, from the one release
//! build, without a test crate per exercise.

use std::{collections::BTreeMap, sync::Mutex, thread, time::Instant};

use anyhow::{Context, Result, bail};

use super::{ExerciseCrate, check_command, exercises, run_bounded};
use crate::{project::Project, steps};

/// What `cargo xtask test` asks of every exercise (built by [`build_all`]):
/// as shipped its check fails, exit 1, with a FAIL line that names
/// `fails_with` and a hint; with `--solution` it passes, exit 0. So a check
/// that cannot fail, or a solution that does not pass, fails CI. Every
/// exercise is checked; the error names each one that is not so.
///
/// Scheduled like the labs: the exercises of a lab that waits on timers
/// (`side-by-side`), and those whose own manifest says their check only
/// waits, run beside each other, one lane per lab, its exercises one after
/// another; every other exercise runs alone.
///
/// [`build_all`]: super::build_all
pub fn check_all(project: &Project) -> Result<()> {
    let checks = Checks::new(project)?;
    checks.side_by_side();
    checks.alone();
    checks.verdict()
}

/// Every exercise's check both ways, in two phases that `cargo xtask test`
/// runs in the labs' tests' own: [`Checks::side_by_side`] beside their
/// batch, [`Checks::alone`] before the tests that run alone. Each phase
/// prints a line per exercise; [`Checks::verdict`] names the wrong ones.
pub struct Checks<'a> {
    project: &'a Project,
    /// The exercises whose checks only wait, and the others.
    beside: Vec<ExerciseCrate>,
    alone: Vec<ExerciseCrate>,
    said: Mutex<Said>,
}

/// What the phases found so far.
#[derive(Default)]
struct Said {
    done: usize,
    wrong: Vec<String>,
}

impl<'a> Checks<'a> {
    pub fn new(project: &'a Project) -> Result<Checks<'a>> {
        let labs = project.labs()?;
        let (beside, alone) = exercises(project)?.into_iter().partition(|exercise| {
            exercise.side_by_side
                || labs
                    .iter()
                    .any(|lab| lab.slug == exercise.chapter && lab.side_by_side)
        });
        Ok(Checks {
            project,
            beside,
            alone,
            said: Mutex::new(Said::default()),
        })
    }

    /// The exercises whose checks only wait, one lane a lab, the lanes at
    /// the same time.
    pub fn side_by_side(&self) {
        let mut lanes: BTreeMap<&str, Vec<&ExerciseCrate>> = BTreeMap::new();
        for exercise in &self.beside {
            lanes.entry(&exercise.chapter).or_default().push(exercise);
        }
        thread::scope(|scope| {
            for lane in lanes.values() {
                scope.spawn(move || {
                    for exercise in lane {
                        self.check(exercise, true);
                    }
                });
            }
        });
    }

    /// The other exercises, one at a time.
    pub fn alone(&self) {
        for exercise in &self.alone {
            self.check(exercise, false);
        }
    }

    /// One exercise's check both ways, and its line.
    fn check(&self, exercise: &ExerciseCrate, beside: bool) {
        let started = Instant::now();
        let verdict = check_both_ways(self.project, exercise);
        self.report(exercise, verdict, started.elapsed().as_secs_f64(), beside);
    }

    fn report(&self, exercise: &ExerciseCrate, verdict: Result<()>, took: f64, beside: bool) {
        let mut said = self
            .said
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        said.done += 1;
        eprintln!(
            "    [{}/{}] {}: {} ({took:.1} s{})",
            said.done,
            self.beside.len() + self.alone.len(),
            exercise.name,
            match &verdict {
                Ok(()) => "fails as shipped, passes with its solution".to_string(),
                Err(error) => format!("WRONG: {error:#}"),
            },
            if beside { ", side by side" } else { "" }
        );
        if let Err(error) = verdict {
            said.wrong
                .push(format!("{}: {}", exercise.name, steps::first_line(&error)));
        }
    }

    /// Ok when every exercise checked so far is as it must be.
    pub fn verdict(self) -> Result<()> {
        let said = self
            .said
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !said.wrong.is_empty() {
            bail!(
                "{} of {} exercise checks are wrong:\n  {}",
                said.wrong.len(),
                self.beside.len() + self.alone.len(),
                said.wrong.join("\n  ")
            );
        }
        Ok(())
    }
}

/// Runs one check as shipped and with its solution; see [`check_all`].
fn check_both_ways(project: &Project, exercise: &ExerciseCrate) -> Result<()> {
    let shipped = run_captured(project, exercise, false)?;
    let solved = run_captured(project, exercise, true)?;
    judge(&shipped, &solved, &exercise.fails_with)
}

/// The verdict on a check's two runs (exit code, what it said): shipped, it
/// exits 1 with a FAIL line naming `fails_with` and a hint; solved, it exits 0
/// with a PASS line.
fn judge(
    (shipped_code, shipped): &(Option<i32>, String),
    (solved_code, solved): &(Option<i32>, String),
    fails_with: &str,
) -> Result<()> {
    if *shipped_code != Some(1) {
        let last = shipped.trim_end().lines().last().unwrap_or_default();
        bail!("as shipped the check must fail (exit 1), it exited {shipped_code:?}: {last}");
    }
    for needed in ["FAIL: ", fails_with, "hint: "] {
        if !shipped.contains(needed) {
            bail!("as shipped its output does not contain {needed:?}:\n{shipped}");
        }
    }
    if *solved_code != Some(0) || !solved.contains("PASS: ") {
        bail!(
            "with the solution the check must pass (exit 0 and a PASS line), it exited {solved_code:?}:\n{solved}"
        );
    }
    Ok(())
}

/// Runs the built check with its output captured (stdout then stderr, each
/// in a temporary file), under the same kill timer as `verify`: its exit
/// code (none when killed) and what it said.
fn run_captured(
    project: &Project,
    exercise: &ExerciseCrate,
    solution: bool,
) -> Result<(Option<i32>, String)> {
    let stdout = tempfile::tempfile().context("creating a temporary file")?;
    let stderr = tempfile::tempfile().context("creating a temporary file")?;
    let mut command = check_command(project, exercise, solution);
    command
        .stdout(stdout.try_clone()?)
        .stderr(stderr.try_clone()?);
    let status = run_bounded(command, &exercise.name)?;
    let mut said = String::new();
    for mut file in [stdout, stderr] {
        use std::io::{Read, Seek};
        file.rewind()?;
        file.read_to_string(&mut said)?;
    }
    Ok((status.and_then(|status| status.code()), said))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_must_fail_as_shipped_naming_its_cause_and_pass_solved() {
        let run = |code: i32, said: &str| (Some(code), said.to_string());
        let failed = run(
            1,
            "FAIL: 3 connections for 20 requests\nhint: share one client",
        );
        let passed = run(0, "PASS: 1 connection");
        assert!(judge(&failed, &passed, "connections for 20 requests").is_ok());
        for (shipped, solved, says) in [
            (&passed, &passed, "as shipped the check must fail"),
            (&failed, &failed, "with the solution the check must pass"),
            (&run(1, "FAIL: other\nhint: x"), &passed, "does not contain"),
            (
                &run(1, "FAIL: 3 connections for 20 requests"),
                &passed,
                "\"hint: \"",
            ),
            (&(None, String::new()), &passed, "exited None"),
        ] {
            let error = judge(shipped, solved, "connections for 20 requests").unwrap_err();
            assert!(error.to_string().contains(says), "{error}");
        }
    }
}
