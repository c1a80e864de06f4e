//! `cargo xtask test`'s run of the workspace's tests (every crate but the
//! xtask), scheduled like the labs themselves; alone, `cargo xtask lab-tests`.
//!
//! `cargo test` runs test binaries one after another, and a lab's tests
//! measure time on this machine, so they ran one test at a time: about 300 s
//! on the 2-core machine, most of it spent waiting on timers with both cores
//! idle. Here the xtask builds the test binaries with cargo (`--no-run`),
//! then runs them itself, in the order `cargo xtask book` runs the labs
//! ([`binaries::Lane`]):
//! - the binaries of the labs that wait on compressed timers (`side-by-side =
//!   true` in `[package.metadata.lab]`), and of the crates that say the same
//!   in `[package.metadata.tests]`, at the same time, as one batch;
//! - then every other binary alone;
//! - and, from the moment cargo has built its binary (the rest of the build
//!   goes on beside it) to the last batch, the tests a package names under
//!   `[package.metadata.tests.background-tests]`: tests that only sleep, for
//!   longer than a batch (the facts' 90 s idle connection), which run only
//!   where [`lab_kit::REAL_TIME`] is set.
//!
//! A lab that runs alone may name tests of its own that only wait
//! (`[package.metadata.tests.side-by-side-tests]`); its binary then runs
//! twice, those tests in the batch and the rest alone (or once more per
//! group, where the list is a list of groups). Inside a binary, one test at
//! a time, as before. A binary's output is shown when it fails.

mod binaries;
mod running;

use std::{
    io::{BufRead, BufReader, Read, Seek},
    process::ExitStatus,
    thread,
};

use anyhow::{Context, Result, anyhow, bail};

use crate::{exercise::Checks, project::Project, steps};
use binaries::{Lane, TestBinary};
use running::{Finished, Running};

/// At most this many lines of a failed binary's output are shown.
const OUTPUT_TAIL: usize = 200;

/// Builds every test binary of the workspace but the xtask's (in release: the
/// artifacts `cargo xtask book` built), runs them in their lanes and the doc
/// tests after them, and fails naming every binary that failed.
pub fn run(project: &Project) -> Result<()> {
    run_beside(project, None)
}

/// [`run`], with the exercises' checks (built already) in its lanes, as
/// `cargo xtask test` runs them: the checks that only wait beside the
/// side-by-side batch, then the others, before the binaries that run alone.
/// The exercises' verdict is the caller's to ask for ([`Checks::verdict`]).
pub fn run_beside(project: &Project, exercises: Option<&Checks>) -> Result<()> {
    let (binaries, mut background) = build(project)?;
    let total = binaries.len();
    let mut failed = Vec::new();
    let mut count = 0;
    let mut report = |finished: Finished| {
        count += 1;
        let lane = match finished.binary.lane {
            Lane::Alone => "",
            Lane::SideBySide => ", side by side",
            Lane::Background => ", in the background",
        };
        eprintln!(
            "    [{count}/{total}] {}: {} ({:.1} s{lane})",
            finished.binary.name,
            finished.summary(),
            finished.duration.as_secs_f64(),
        );
        if !finished.ok() {
            eprintln!("{}", tail(&finished.output, OUTPUT_TAIL));
            failed.push(format!("{}: {}", finished.binary.name, finished.summary()));
        }
    };
    // The side-by-side batch comes first (see `batches`); the exercises'
    // waiting checks run beside it, the others after it, before the
    // binaries that run alone.
    let mut batches = batches(&binaries).into_iter().peekable();
    let together = batches
        .next_if(|batch| batch.iter().all(|binary| binary.lane == Lane::SideBySide))
        .unwrap_or_default();
    let started = together.iter().map(Running::start).collect::<Result<_>>()?;
    thread::scope(|scope| {
        if let Some(checks) = exercises {
            scope.spawn(|| checks.side_by_side());
        }
        running::wait_all(started, &mut background, &mut report)
    })?;
    if let Some(checks) = exercises {
        checks.alone();
    }
    for batch in batches {
        let started = batch.iter().map(Running::start).collect::<Result<_>>()?;
        running::wait_all(started, &mut background, &mut report)?;
    }
    running::wait_all(background, &mut Vec::new(), &mut report)?;
    let doc = doc_tests(project);
    if let Err(error) = &doc {
        failed.push(format!("doc tests: {}", steps::first_line(error)));
    }
    if !failed.is_empty() {
        bail!(
            "{} of {} test runs failed:\n  {}",
            failed.len(),
            total + 1,
            failed.join("\n  ")
        );
    }
    Ok(())
}

/// `cargo test --release` over every crate but the xtask, with `extra`
/// arguments; cargo's progress (stderr) on screen and its stdout returned,
/// with whether it succeeded.
fn cargo_test(project: &Project, extra: &[&str]) -> Result<(ExitStatus, String)> {
    let mut stdout = tempfile::tempfile().context("creating a temporary file")?;
    let mut command = cargo_test_command(project);
    command.args(extra).stdout(stdout.try_clone()?);
    let status = steps::status_with_heartbeat(&mut command, &format!("cargo test {}", extra[0]))?;
    let mut text = String::new();
    stdout.rewind()?;
    stdout.read_to_string(&mut text)?;
    Ok((status, text))
}

/// `cargo test --release` over every crate but the xtask.
fn cargo_test_command(project: &Project) -> std::process::Command {
    let mut command = project.cargo();
    command.args(["test", "--release", "--workspace", "--exclude", "xtask"]);
    command
}

/// `cargo test --no-run`, and the binaries it built read from its JSON
/// messages as cargo writes them. A background run starts as soon as its
/// binary is built: its wait in real time (the facts' 92 s) then overlaps
/// the rest of the build instead of setting the length of the runs.
fn build(project: &Project) -> Result<(Vec<TestBinary>, Vec<Running>)> {
    let (messages, writer) = std::io::pipe().context("creating a pipe for cargo's messages")?;
    let mut command = cargo_test_command(project);
    // The targets that hold tests (libraries, binaries and tests/), not the
    // examples `cargo test` would also build: clippy checks that those compile.
    command
        .args([
            "--tests",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stdout(writer);
    // Cargo runs in a thread of its own, and this thread reads its messages
    // and starts the background runs: a run is killed when the thread that
    // started it ends (`PR_SET_PDEATHSIG` follows the thread, not the
    // process), so it must be the thread that waits for it later.
    let building = thread::spawn(move || {
        let status = steps::status_with_heartbeat(&mut command, "cargo test --tests");
        // The command holds the pipe's other end: without it the reader
        // sees the end of cargo's messages.
        drop(command);
        status
    });
    let (mut found, mut background) = (Vec::new(), Vec::new());
    let read = read_messages(messages, &mut found, &mut background);
    let status = building
        .join()
        .map_err(|_| anyhow!("the thread running cargo panicked"));
    if read.is_err() || !matches!(&status, Ok(Ok(status)) if status.success()) {
        for run in &background {
            run.kill_group();
        }
    }
    read?;
    let status = status??;
    if !status.success() {
        bail!("building the tests failed ({status})");
    }
    if found.is_empty() {
        bail!("cargo built no test binary");
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((found, background))
}

/// Reads cargo's JSON messages until cargo ends, noting every test binary
/// and starting each background run as soon as its binary is built.
fn read_messages(
    messages: std::io::PipeReader,
    found: &mut Vec<TestBinary>,
    background: &mut Vec<Running>,
) -> Result<()> {
    for line in BufReader::new(messages).lines() {
        let line = line.context("reading cargo's messages")?;
        for binary in binaries::from_message(&line)? {
            if binary.lane == Lane::Background {
                background.push(Running::start(&binary)?);
            }
            found.push(binary);
        }
    }
    Ok(())
}

/// The side-by-side binaries as one batch, run first (a failure there shows
/// soonest), then each binary that must run alone as a batch of its own, in
/// name order. Background runs are in no batch.
fn batches(binaries: &[TestBinary]) -> Vec<Vec<TestBinary>> {
    let together: Vec<TestBinary> = binaries
        .iter()
        .filter(|binary| binary.lane == Lane::SideBySide)
        .cloned()
        .collect();
    let mut batches = Vec::new();
    if !together.is_empty() {
        batches.push(together);
    }
    batches.extend(
        binaries
            .iter()
            .filter(|binary| binary.lane == Lane::Alone)
            .map(|binary| vec![binary.clone()]),
    );
    batches
}

/// The doc tests (cargo builds and runs them itself; only the kit has any),
/// their output shown only when they fail.
fn doc_tests(project: &Project) -> Result<()> {
    let (status, said) = cargo_test(project, &["--doc", "--quiet"])?;
    if !status.success() {
        eprintln!("{}", tail(&said, OUTPUT_TAIL));
        bail!("the doc tests failed ({status})");
    }
    Ok(())
}

/// The last `lines` lines of `text`, indented.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.trim_end().lines().collect();
    let skip = all.len().saturating_sub(lines);
    let mut shown = String::new();
    if skip > 0 {
        shown += &format!("      ({skip} earlier lines)\n");
    }
    for line in &all[skip..] {
        shown += "      ";
        shown += line;
        shown += "\n";
    }
    shown.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use binaries::Part;

    fn binary(name: &str, lane: Lane) -> TestBinary {
        TestBinary {
            dir: PathBuf::from("/nowhere"),
            name: name.to_string(),
            executable: PathBuf::from("/nowhere/bin"),
            lane,
            part: Part::Every,
        }
    }

    #[test]
    fn the_side_by_side_binaries_share_one_batch_and_each_other_runs_alone() {
        let all = [
            binary("a", Lane::Alone),
            binary("b", Lane::SideBySide),
            binary("c", Lane::Alone),
            binary("d", Lane::SideBySide),
            binary("e", Lane::Background),
        ];
        let batches = batches(&all);
        let names: Vec<Vec<&str>> = batches
            .iter()
            .map(|batch| batch.iter().map(|binary| binary.name.as_str()).collect())
            .collect();
        assert_eq!(names, [vec!["b", "d"], vec!["a"], vec!["c"]]);
    }

    #[test]
    fn a_long_output_is_cut_to_its_tail() {
        let text: String = (1..=5).map(|line| format!("line {line}\n")).collect();
        assert_eq!(
            tail(&text, 2),
            "      (3 earlier lines)\n      line 4\n      line 5"
        );
        assert_eq!(tail("one", 2), "      one");
    }
}
