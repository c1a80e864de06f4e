//! The reader's exercises (`exercises/<name>/`, see the exercise kit), for
//! `cargo xtask exercise [verify | watch] [<name>] [--solution]`, `prepare`
//! and `test`: the list with the reader's progress; `verify` builds one and
//! runs its check (the reader's `src/lib.rs`, or `solution/lib.rs` with
//! `--solution`); `watch` verifies again each time a file of the exercise
//! changes.
//!
//! Progress is the last verdict of each exercise's own code, one line per
//! exercise in `target/exercises/progress`.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread,
    time::{Duration, SystemTime},
};

use anyhow::{Context, Result, bail};
use lab_kit::manifest::PackageManifest;
use serde::Deserialize;

use crate::{project::Project, release};
use lab_kit::exit::bad_input;

mod both_ways;

pub use both_ways::{Checks, check_all};

/// One exercise, as its Cargo.toml describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExerciseCrate {
    /// The package's name, also its folder under exercises/.
    pub name: String,
    /// The slug of the chapter it belongs to.
    pub chapter: String,
    pub title: String,
    /// What the check's FAIL line names as shipped (`fails_with` in its
    /// manifest): the bug the reader fixes, measured.
    pub fails_with: String,
    /// Whether its check only waits on timers, so `cargo xtask test` may run
    /// it beside others though its lab runs alone (`side-by-side = true` in
    /// its manifest; an exercise of a side-by-side lab always is).
    pub side_by_side: bool,
    pub dir: PathBuf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExerciseMetadata {
    chapter: String,
    title: String,
    fails_with: String,
    #[serde(default, rename = "side-by-side")]
    side_by_side: bool,
}

/// The check may take 30 s and ends itself a little later; past this the
/// xtask stops it.
const KILL_AFTER: Duration = Duration::from_secs(45);

/// Every exercise, sorted by name (the exercise kit has no metadata and is
/// not one).
pub fn exercises(project: &Project) -> Result<Vec<ExerciseCrate>> {
    let root = project.root.join("exercises");
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(&root) else {
        return Ok(found);
    };
    for entry in entries {
        let dir = entry?.path();
        let manifest = dir.join("Cargo.toml");
        let Ok(text) = fs::read_to_string(&manifest) else {
            continue;
        };
        let package = PackageManifest::<ExerciseMetadata>::parse(&text, "exercise")
            .with_context(|| manifest.display().to_string())?;
        let Some(metadata) = package.metadata else {
            continue;
        };
        if dir.file_name().and_then(|name| name.to_str()) != Some(package.name.as_str()) {
            bail!(
                "{}: exercise {} must live in exercises/{}",
                manifest.display(),
                package.name,
                package.name
            );
        }
        found.push(ExerciseCrate {
            name: package.name,
            chapter: metadata.chapter,
            title: metadata.title,
            fails_with: metadata.fails_with,
            side_by_side: metadata.side_by_side,
            dir,
        });
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// The exercise named `name`, or a usage error listing the exercises.
pub fn find<'a>(all: &'a [ExerciseCrate], name: &str) -> Result<&'a ExerciseCrate> {
    all.iter()
        .find(|exercise| exercise.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|exercise| exercise.name.as_str()).collect();
            bad_input(format!(
                "unknown exercise {name:?}; the exercises are: {}",
                names.join(", ")
            ))
        })
}

/// The list `cargo xtask exercise` prints, with the reader's progress.
pub fn list(project: &Project, all: &[ExerciseCrate]) -> String {
    listing(all, &Progress::load(project))
}

/// Builds the exercise and runs its check (the reader's code, or the
/// solution): fails unless it passes.
pub fn build_and_verify(project: &Project, exercise: &ExerciseCrate, solution: bool) -> Result<()> {
    build(project, exercise)?;
    let name = &exercise.name;
    match verify(project, exercise, solution)? {
        Outcome::Passed => Ok(()),
        Outcome::Failed => bail!("{name} does not pass yet"),
        Outcome::CouldNotCheck => bail!("{name} could not be checked"),
    }
}

/// The table `cargo xtask exercise` prints: one line per exercise, grouped
/// by chapter in the book's order of names, and what to do next.
fn listing(all: &[ExerciseCrate], progress: &Progress) -> String {
    let mut text = String::new();
    let mut passed = 0;
    let mut next = None;
    for exercise in all {
        let mark = match progress.last(&exercise.name) {
            Some(Outcome::Passed) => {
                passed += 1;
                "done"
            }
            Some(_) => "not yet",
            None => "",
        };
        if next.is_none() && mark != "done" {
            next = Some(exercise.name.as_str());
        }
        text.push_str(&format!(
            "{mark:<8} {:<36} {:<16} {}\n",
            exercise.name, exercise.chapter, exercise.title
        ));
    }
    text.push_str(&format!("\n{passed} of {} exercises pass.", all.len()));
    match next {
        Some(name) => text.push_str(&format!(" Next: cargo xtask exercise verify {name}\n")),
        None => text.push('\n'),
    }
    text
}

/// Builds the exercise's check (and with it the reader's code) in release,
/// with the labs, so that no shared crate is compiled again (see `release`).
fn build(project: &Project, exercise: &ExerciseCrate) -> Result<()> {
    release::build(project, &[&exercise.name]).with_context(|| {
        format!(
            "{} does not build",
            exercise.dir.join("src/lib.rs").display()
        )
    })
}

/// Builds every exercise's check in release, with the labs.
pub fn build_all(project: &Project) -> Result<()> {
    let all = exercises(project)?;
    let names: Vec<&str> = all.iter().map(|exercise| exercise.name.as_str()).collect();
    release::build(project, &names)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    Passed,
    Failed,
    CouldNotCheck,
}

/// Runs the built check; its verdict goes straight to the terminal. The
/// reader's own verdicts are kept as progress.
fn verify(project: &Project, exercise: &ExerciseCrate, solution: bool) -> Result<Outcome> {
    let status = run_bounded(check_command(project, exercise, solution), &exercise.name)?;
    let outcome = match status.and_then(|status| status.code()) {
        Some(0) => Outcome::Passed,
        Some(1) => Outcome::Failed,
        None if status.is_none() => {
            eprintln!(
                "{}: stopped after {} s",
                exercise.name,
                KILL_AFTER.as_secs()
            );
            Outcome::CouldNotCheck
        }
        _ => Outcome::CouldNotCheck,
    };
    if !solution {
        Progress::load(project).record(project, &exercise.name, outcome)?;
    }
    Ok(outcome)
}

/// The built check of `exercise`, as shipped or with `--solution`.
pub(crate) fn check_command(
    project: &Project,
    exercise: &ExerciseCrate,
    solution: bool,
) -> Command {
    let exe = project.cargo_target().join("release").join(&exercise.name);
    let mut command = Command::new(exe);
    if solution {
        command.arg("--solution");
    }
    command.stdin(Stdio::null());
    command
}

/// Runs a check in its own process group, killed with the xtask, and kills
/// the group past [`KILL_AFTER`]: its exit status, or none when killed.
pub(crate) fn run_bounded(
    mut command: Command,
    name: &str,
) -> Result<Option<std::process::ExitStatus>> {
    lab_kit::process::own_group_killed_with_parent(&mut command);
    let mut child = command
        .spawn()
        .with_context(|| format!("starting the check of {name}"))?;
    Ok(lab_kit::process::wait_or_kill_group(
        &mut child,
        KILL_AFTER,
        Duration::from_millis(50),
    )?)
}

/// Verifies, then again whenever a file under the exercise's `src/` or
/// `solution/` changes, until Ctrl-C.
pub fn watch(project: &Project, exercise: &ExerciseCrate) -> Result<()> {
    let mut seen = newest_change(&exercise.dir)?;
    loop {
        match build(project, exercise).and_then(|()| verify(project, exercise, false)) {
            Ok(Outcome::Passed) => {
                println!("\nIt passes. Next: cargo xtask exercise (the list)");
                return Ok(());
            }
            Ok(_) => {}
            Err(error) => eprintln!("error: {error:#}"),
        }
        println!(
            "\nwatching {} for changes (Ctrl-C stops)",
            exercise.dir.join("src").display()
        );
        loop {
            thread::sleep(Duration::from_millis(400));
            let now = newest_change(&exercise.dir)?;
            if now != seen {
                seen = now;
                break;
            }
        }
    }
}

/// The latest modification time of the files the reader edits.
fn newest_change(dir: &Path) -> Result<Option<SystemTime>> {
    let mut newest = None;
    for folder in ["src", "solution"] {
        let Ok(entries) = fs::read_dir(dir.join(folder)) else {
            continue;
        };
        for entry in entries {
            let modified = entry?.metadata()?.modified()?;
            newest = newest.max(Some(modified));
        }
    }
    Ok(newest)
}

/// The last verdict on each exercise's own code.
struct Progress(BTreeMap<String, Outcome>);

impl Progress {
    fn path(project: &Project) -> PathBuf {
        project.cargo_target().join("exercises/progress")
    }

    /// Lines `<name> passed|failed|unchecked`; a file that can't be read is
    /// no progress yet, an unknown word is not a verdict.
    fn load(project: &Project) -> Progress {
        let text = fs::read_to_string(Self::path(project)).unwrap_or_default();
        Progress(
            text.lines()
                .filter_map(|line| {
                    let (name, word) = line.split_once(' ')?;
                    let outcome = match word {
                        "passed" => Outcome::Passed,
                        "failed" => Outcome::Failed,
                        "unchecked" => Outcome::CouldNotCheck,
                        _ => return None,
                    };
                    Some((name.to_string(), outcome))
                })
                .collect(),
        )
    }

    fn last(&self, name: &str) -> Option<Outcome> {
        self.0.get(name).copied()
    }

    fn record(mut self, project: &Project, name: &str, outcome: Outcome) -> Result<()> {
        self.0.insert(name.to_string(), outcome);
        let path = Self::path(project);
        let text: String = self
            .0
            .iter()
            .map(|(name, outcome)| {
                let word = match outcome {
                    Outcome::Passed => "passed",
                    Outcome::Failed => "failed",
                    Outcome::CouldNotCheck => "unchecked",
                };
                format!("{name} {word}\n")
            })
            .collect();
        let dir = path.parent().context("the progress file has a folder")?;
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exercise(name: &str, chapter: &str) -> ExerciseCrate {
        ExerciseCrate {
            name: name.into(),
            chapter: chapter.into(),
            title: format!("the {name} exercise"),
            fails_with: "what it measured".into(),
            side_by_side: false,
            dir: PathBuf::from(name),
        }
    }

    #[test]
    fn the_list_marks_progress_and_names_the_next_exercise() {
        let all = [exercise("a-one", "a"), exercise("b-two", "b")];
        let mut progress = Progress(BTreeMap::new());
        let text = listing(&all, &progress);
        assert!(text.contains("0 of 2 exercises pass. Next: cargo xtask exercise verify a-one"));
        progress.0.insert("a-one".into(), Outcome::Passed);
        progress.0.insert("b-two".into(), Outcome::Failed);
        let text = listing(&all, &progress);
        assert!(text.starts_with("done     a-one"), "{text}");
        assert!(text.contains("not yet  b-two"), "{text}");
        assert!(text.contains("1 of 2 exercises pass. Next: cargo xtask exercise verify b-two"));
    }

    #[test]
    fn every_exercise_folder_is_an_exercise_of_a_lab_chapter() {
        let project = Project::locate();
        let all = exercises(&project).unwrap();
        let labs: Vec<String> = project
            .labs()
            .unwrap()
            .into_iter()
            .map(|lab| lab.slug)
            .collect();
        assert!(!all.is_empty());
        for exercise in &all {
            assert!(labs.contains(&exercise.chapter), "{exercise:?}");
            assert!(
                exercise.name.starts_with(&format!("{}-", exercise.chapter)),
                "an exercise is named <chapter>-<what>: {exercise:?}"
            );
        }
    }

    #[test]
    fn an_unknown_exercise_is_a_usage_error_listing_the_known_ones() {
        let all = [exercise("a-one", "a")];
        let error = find(&all, "nope").unwrap_err();
        assert!(lab_kit::exit::is_bad_input(&error));
        assert!(error.to_string().contains("the exercises are: a-one"));
    }
}
