//! Running a set of labs, built already, for `cargo xtask lab` and
//! `cargo xtask book`: run them (each one through `one_lab`), show their
//! progress, and print the timing table.
//!
//! Labs that wait on compressed timers (`side-by-side = true` in their
//! `[package.metadata.lab]`) run at the same time, as one batch; so do the
//! labs whose first parts wait and whose last parts need the machine
//! (`side-by-side-until-alone = true`), which wait for the rest of the batch
//! to end through the batch's lock files (`lab_kit::batch`) before those
//! parts. Every other lab runs alone, because what it measures is the CPU
//! (blocking-lag's lag, the cancellation spiral's goodput). A lab or part
//! that runs alone never shares the machine with another lab.

mod one_lab;

use std::{
    io::{IsTerminal, Write},
    path::{Path, PathBuf},
    process::Command,
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use lab_kit::Mode;

use crate::{project::Lab, project::Project, steps::Steps};
use lab_kit::exit::bad_input;

/// Without a terminal to redraw a status line in, a running lab's progress is
/// printed as a new line this often.
const HEARTBEAT: Duration = Duration::from_secs(10);

/// One row of the timing report.
struct LabReport {
    slug: String,
    mode: Mode,
    duration: Duration,
    records: usize,
    outcome: Result<()>,
}

/// Runs `labs`, built already, into `out_dir`; fails, naming each failed lab,
/// if any failed (their previous data files stay as they were). `settings`
/// are `--set` pairs; `name` is the machine's name for the meta record
/// (`--name`).
pub fn run_labs(
    project: &Project,
    labs: &[Lab],
    mode: Mode,
    settings: &[String],
    name: Option<&str>,
    out_dir: &Path,
    steps: &mut Steps,
) -> Result<()> {
    if !settings.is_empty() {
        steps.run("check the settings", || {
            check_settings(project, labs, settings)
        })?;
    }
    let batches = batches(labs);
    let step = format!("run {} lab(s), {mode} mode", labs.len());
    steps.run(&step, || {
        let binaries = project.cargo_target().join("release");
        // The side-by-side labs' lock files (`lab_kit::batch`): a lab that
        // runs its last parts alone waits there for the others to end.
        let locks = tempfile::Builder::new()
            .prefix("lab-batch-")
            .tempdir_in(project.cargo_target())
            .context("making a folder for the batch's lock files")?;
        let mut reports = Vec::new();
        let mut done = 0;
        for batch in &batches {
            let first = done + 1;
            done += batch.len();
            let counter = if batch.len() == 1 {
                format!("[{first}/{}]", labs.len())
            } else {
                format!("[{first}-{done}/{}]", labs.len())
            };
            for lab in batch {
                eprintln!(
                    "{counter} {} ({mode}, budget {}s){}",
                    lab.slug,
                    lab.budget(mode).as_secs(),
                    if batch.len() > 1 { " side by side" } else { "" }
                );
            }
            let launch = Launch {
                root: &project.root,
                binaries: &binaries,
                mode,
                settings,
                name,
                locks: (batch.len() > 1).then(|| locks.path()),
            };
            reports.extend(run_batch(&launch, batch, out_dir));
        }
        reports.sort_by(|left, right| left.slug.cmp(&right.slug));
        print_table(&reports);
        let failed: Vec<String> = reports
            .iter()
            .filter_map(|report| {
                // The full error was printed when the lab failed; here, one
                // line each: what went wrong, and the lab's own last word
                // (its one-line error, when it printed one).
                let error = report.outcome.as_ref().err()?;
                let text = format!("{error:#}");
                let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
                let first = lines.next().unwrap_or_default();
                let last = lines
                    .next_back()
                    .map(|line| format!(": {line}"))
                    .unwrap_or_default();
                let first = if last.is_empty() {
                    first
                } else {
                    first.trim_end_matches(one_lab::STDERR_TAIL_JOIN)
                };
                Some(format!("  {}: {first}{last}", report.slug))
            })
            .collect();
        if !failed.is_empty() {
            bail!(
                "{} of {} lab(s) failed; their previous data files are unchanged:\n{}",
                failed.len(),
                reports.len(),
                failed.join("\n")
            );
        }
        Ok(())
    })
}

/// Asks each lab whether it takes `settings` (`--settings` prints them and
/// runs nothing): a key it does not have, or a bad value, is bad usage, said
/// in the lab's own one line, before anything runs.
fn check_settings(project: &Project, labs: &[Lab], settings: &[String]) -> Result<()> {
    let binaries = project.cargo_target().join("release");
    for lab in labs {
        let mut command = Command::new(binaries.join(&lab.package));
        command.arg("--settings");
        for setting in settings {
            command.arg("--set").arg(setting);
        }
        let output = command
            .current_dir(&project.root)
            .output()
            .map_err(|error| anyhow::anyhow!("starting {}: {error}", lab.package))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let line = stderr.lines().rev().find(|line| !line.trim().is_empty());
            return Err(bad_input(
                line.unwrap_or("the lab refused the settings")
                    .trim_start_matches("error: ")
                    .to_string(),
            ));
        }
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            if settings
                .iter()
                .any(|setting| setting.split('=').next() == line.split('=').next())
            {
                eprintln!("    {}: {line}", lab.slug);
            }
        }
    }
    Ok(())
}

/// The labs in the order they run: each lab that must run alone is a batch of
/// its own; the side-by-side labs, and those that run side by side until
/// their last parts, are one batch, run last.
fn batches(labs: &[Lab]) -> Vec<Vec<&Lab>> {
    let mut batches: Vec<Vec<&Lab>> = labs
        .iter()
        .filter(|lab| !lab.runs_in_batch())
        .map(|lab| vec![lab])
        .collect();
    let together: Vec<&Lab> = labs.iter().filter(|lab| lab.runs_in_batch()).collect();
    if !together.is_empty() {
        batches.push(together);
    }
    batches
}

/// When the xtask kills `lab` if it has not ended: the lab stops itself at
/// its budget, and this is the backstop. A lab that runs its last parts
/// alone leaves the time it waits for the rest of its batch out of its
/// budget, so its kill timer allows for every other lab of the batch too.
fn kill_after(lab: &Lab, batch: &[&Lab], mode: Mode) -> Duration {
    let backstop = lab.budget(mode) + Duration::from_secs(5);
    if lab.side_by_side || batch.len() < 2 {
        return backstop;
    }
    batch
        .iter()
        .filter(|other| other.slug != lab.slug)
        .map(|other| other.budget(mode) + Duration::from_secs(5))
        .sum::<Duration>()
        + backstop
}

enum Event {
    Line(usize, String),
    Finished(usize, Duration, Result<one_lab::RunOutput>),
}

/// How every lab of a batch is started.
struct Launch<'a> {
    /// The project's root: each lab runs there.
    root: &'a Path,
    /// Where the labs' release binaries are.
    binaries: &'a Path,
    mode: Mode,
    /// `--set` pairs.
    settings: &'a [String],
    /// `--name`.
    name: Option<&'a str>,
    /// The batch's lock files (`lab_kit::batch::ENV`), when it has more
    /// than one lab.
    locks: Option<&'a Path>,
}

impl Launch<'_> {
    /// The command line that runs `lab`.
    fn command(&self, lab: &Lab) -> Command {
        let mut command = Command::new(self.binaries.join(&lab.package));
        command
            .arg(format!("--{}", self.mode))
            .current_dir(self.root);
        for setting in self.settings {
            command.arg("--set").arg(setting);
        }
        if let Some(name) = self.name {
            command.arg("--name").arg(name);
        }
        if let Some(locks) = self.locks {
            command.env(lab_kit::batch::ENV, locks);
        }
        command
    }
}

/// Runs the labs of one batch at the same time, each on its own thread, and
/// shows their progress until the last one ends.
fn run_batch(launch: &Launch, batch: &[&Lab], out_dir: &Path) -> Vec<LabReport> {
    let mode = launch.mode;
    let (sender, events) = mpsc::channel();
    let started = Instant::now();
    for (index, lab) in batch.iter().enumerate() {
        let command = launch.command(lab);
        let destination: PathBuf = out_dir.join(format!("{}.jsonl", lab.slug));
        // The lab stops itself at its budget; the kill timer is the backstop.
        let kill_after = kill_after(lab, batch, mode);
        let slug = lab.slug.clone();
        let sender = sender.clone();
        thread::spawn(move || {
            let lines = sender.clone();
            let result =
                one_lab::run_lab_command(command, &slug, kill_after, &destination, |line| {
                    let _ = lines.send(Event::Line(index, line.to_string()));
                });
            let _ = sender.send(Event::Finished(index, started.elapsed(), result));
        });
    }
    drop(sender);

    let mut progress = Progress::new(batch);
    let mut reports = Vec::new();
    while reports.len() < batch.len() {
        match events.recv_timeout(Duration::from_millis(250)) {
            Ok(Event::Line(index, line)) => progress.line(index, line),
            Ok(Event::Finished(index, duration, result)) => {
                progress.clear();
                let lab = batch[index];
                let destination = out_dir.join(format!("{}.jsonl", lab.slug));
                let (records, outcome) = match result {
                    Ok(output) => (output.records, Ok(())),
                    Err(error) => (0, Err(error)),
                };
                match &outcome {
                    Ok(()) => eprintln!(
                        "  {}: done in {:.1}s, {records} records -> {}",
                        lab.slug,
                        duration.as_secs_f64(),
                        destination.display()
                    ),
                    Err(error) => eprintln!(
                        "  {}: FAILED after {:.1}s: {error:#}",
                        lab.slug,
                        duration.as_secs_f64()
                    ),
                }
                progress.finish(index);
                reports.push(LabReport {
                    slug: lab.slug.clone(),
                    mode,
                    duration,
                    records,
                    outcome,
                });
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // Every thread has sent its Finished; nothing more will come.
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        progress.tick();
    }
    progress.clear();
    reports
}

/// What the reader sees while labs run: on a terminal, one status line
/// redrawn in place; otherwise a line per running lab every [`HEARTBEAT`], so
/// a log never sits on one line while work goes on.
struct Progress {
    started: Instant,
    interactive: bool,
    running: Vec<Option<(String, String)>>,
    last_heartbeat: Instant,
    drawn: bool,
}

impl Progress {
    fn new(batch: &[&Lab]) -> Progress {
        Progress {
            started: Instant::now(),
            interactive: std::io::stderr().is_terminal(),
            running: batch
                .iter()
                .map(|lab| Some((lab.slug.clone(), String::new())))
                .collect(),
            last_heartbeat: Instant::now(),
            drawn: false,
        }
    }

    fn line(&mut self, index: usize, line: String) {
        if let Some(Some((slug, last))) = self.running.get_mut(index) {
            // Labs start their progress lines with their slug; it is shown
            // once, before the line.
            let line = line
                .strip_prefix(slug.as_str())
                .and_then(|rest| rest.strip_prefix(": "))
                .map_or(line.clone(), str::to_string);
            *last = line;
        }
    }

    fn finish(&mut self, index: usize) {
        if let Some(slot) = self.running.get_mut(index) {
            *slot = None;
        }
    }

    fn tick(&mut self) {
        let elapsed = self.started.elapsed().as_secs_f64();
        let running: Vec<&(String, String)> = self.running.iter().flatten().collect();
        if running.is_empty() {
            return;
        }
        if self.interactive {
            let status = if let [(slug, line)] = running.as_slice() {
                format!("{slug}: {line}")
            } else {
                running
                    .iter()
                    .map(|(slug, _)| slug.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let shown: String = status.chars().take(90).collect();
            eprint!("\r\x1b[2K  {elapsed:>5.1}s  {shown}");
            let _ = std::io::stderr().flush();
            self.drawn = true;
        } else if self.last_heartbeat.elapsed() >= HEARTBEAT {
            self.last_heartbeat = Instant::now();
            for (slug, line) in running {
                let shown: String = line.chars().take(90).collect();
                eprintln!("  {elapsed:>5.1}s  {slug}: {shown}");
            }
        }
    }

    fn clear(&mut self) {
        if self.drawn {
            eprint!("\r\x1b[2K");
            self.drawn = false;
        }
    }
}

fn print_table(reports: &[LabReport]) {
    println!(
        "{:<18} {:<6} {:>10} {:>8}  outcome",
        "lab", "mode", "duration", "records"
    );
    for report in reports {
        let outcome = if report.outcome.is_ok() {
            "ok"
        } else {
            "FAILED"
        };
        println!(
            "{:<18} {:<6} {:>9.1}s {:>8}  {outcome}",
            report.slug,
            report.mode.to_string(),
            report.duration.as_secs_f64(),
            report.records
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab(slug: &str, runs_in_batch: bool) -> Lab {
        Lab {
            slug: slug.to_string(),
            package: format!("lab-{slug}"),
            title: slug.to_string(),
            dir: PathBuf::from(slug),
            quick_budget: Duration::from_secs(1),
            full_budget: Duration::from_secs(2),
            side_by_side: runs_in_batch,
            side_by_side_until_alone: false,
        }
    }

    #[test]
    fn a_lab_that_waits_for_its_batch_is_killed_only_after_the_batch_could_end() {
        let (waiting, until_alone) = (lab("a", true), lab("b", true));
        let until_alone = Lab {
            side_by_side: false,
            side_by_side_until_alone: true,
            ..until_alone
        };
        let batch = [&waiting, &until_alone];
        let seconds = |lab: &Lab, batch: &[&Lab]| kill_after(lab, batch, Mode::Quick).as_secs();
        assert_eq!(seconds(&waiting, &batch), 6);
        assert_eq!(seconds(&until_alone, &batch), 12);
        assert_eq!(seconds(&until_alone, &[&until_alone]), 6);
    }

    #[test]
    fn labs_that_need_the_cpu_run_alone_and_the_rest_run_together_last() {
        let labs = [
            lab("a", true),
            lab("b", false),
            lab("c", true),
            lab("d", false),
        ];
        let order: Vec<Vec<&str>> = batches(&labs)
            .iter()
            .map(|batch| batch.iter().map(|lab| lab.slug.as_str()).collect())
            .collect();
        assert_eq!(order, vec![vec!["b"], vec!["d"], vec!["a", "c"]]);
        assert!(batches(&[]).is_empty());
    }
}
