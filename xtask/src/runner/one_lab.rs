//! Runs one lab binary the way the book needs it run: in its own process
//! group, under a kill timer, every stdout line parsed as a record as it
//! arrives, the data file replaced only when the whole run was good.

use std::{
    collections::VecDeque,
    fs,
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, anyhow, bail};
use lab_kit::record::{Record, parse_line};
use tempfile::NamedTempFile;

/// How many of a failed lab's last stderr lines the error shows.
const STDERR_TAIL: usize = 12;

/// How long a lab's streams may stay open after the lab itself exited,
/// before whatever still holds them counts as left behind.
const STREAM_GRACE: Duration = Duration::from_secs(2);

/// What a good run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutput {
    pub records: usize,
}

enum Event {
    Stdout(usize, std::io::Result<String>),
    StdoutClosed,
    Stderr(String),
    StderrClosed,
}

/// Kills a whole process group when dropped, so no exit path of the xtask
/// (an error, a panic, a timeout) leaves a lab or its children running.
struct GroupGuard(libc::pid_t);

impl GroupGuard {
    fn new(group: libc::pid_t) -> GroupGuard {
        crate::reaper::register(group);
        GroupGuard(group)
    }

    fn kill(&self) {
        lab_kit::process::kill_group(self.0);
    }

    fn any_alive(&self) -> bool {
        lab_kit::process::group_exists(self.0)
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
        crate::reaper::unregister(self.0);
    }
}

/// A temporary file in the destination's folder (so the rename stays on one
/// file system), removed by `tempfile` unless it is persisted.
fn temporary_beside(destination: &Path) -> Result<NamedTempFile> {
    let dir = destination.parent().context("the data file has a folder")?;
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))
}

/// fsync, then rename over the destination: readers see the old file or the
/// whole new one, never half of it.
fn persist(temp: NamedTempFile, destination: &Path) -> Result<()> {
    temp.as_file()
        .sync_all()
        .with_context(|| format!("syncing {}", temp.path().display()))?;
    temp.persist(destination).map(drop).map_err(|error| {
        anyhow!(
            "renaming {} to {}: {}",
            error.file.path().display(),
            destination.display(),
            error.error
        )
    })
}

/// Runs `command` (a lab), expecting its records to name lab `slug`, killing
/// it after `kill_after`, and writes its records to `destination` if and
/// only if everything went well. `on_stderr` sees each stderr line as it comes.
pub fn run_lab_command(
    mut command: Command,
    slug: &str,
    kill_after: Duration,
    destination: &Path,
    mut on_stderr: impl FnMut(&str),
) -> Result<RunOutput> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Own process group: the kill timer reaches the lab's children too; if
    // the xtask dies (Ctrl-C, SIGKILL), the kernel kills the lab.
    lab_kit::process::own_group_killed_with_parent(&mut command);
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .spawn()
        .with_context(|| format!("starting {program}"))?;
    let group = GroupGuard::new(child.id() as libc::pid_t);
    let stdout = child.stdout.take().context("the lab's stdout is piped")?;
    let stderr = child.stderr.take().context("the lab's stderr is piped")?;
    let events = read_streams(stdout, stderr);

    let mut run = Watch::new(temporary_beside(destination)?);
    let started = Instant::now();
    while run.open_streams > 0 || run.exit_status.is_none() {
        match events.recv_timeout(Duration::from_millis(50)) {
            Ok(Event::Stdout(line_number, line)) => {
                run.stdout_line(line_number, line, slug, &group)?;
            }
            Ok(Event::Stderr(line)) => {
                on_stderr(&line);
                run.stderr_line(line);
            }
            Ok(Event::StdoutClosed | Event::StderrClosed) => run.open_streams -= 1,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => run.open_streams = 0,
        }
        if run.exit_status.is_none() {
            run.check_exit(&mut child, &group, started, kill_after)?;
        }
        if run.streams_outlived_the_lab(&group) {
            break;
        }
    }
    let records = run.records;
    let temp = run.verdict(&group)?;
    persist(temp, destination)?;
    Ok(RunOutput { records })
}

/// Reads the lab's stdout and stderr on a thread each, into one channel of
/// events, each stream ending with its closed event.
fn read_streams(stdout: ChildStdout, stderr: ChildStderr) -> mpsc::Receiver<Event> {
    let (sender, events) = mpsc::channel();
    let stdout_sender = sender.clone();
    thread::spawn(move || {
        for (index, line) in BufReader::new(stdout).lines().enumerate() {
            if stdout_sender.send(Event::Stdout(index + 1, line)).is_err() {
                return;
            }
        }
        let _ = stdout_sender.send(Event::StdoutClosed);
    });
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if sender.send(Event::Stderr(line)).is_err() {
                return;
            }
        }
        let _ = sender.send(Event::StderrClosed);
    });
    events
}

/// What `run_lab_command` knows of a run while it watches it: the records
/// so far (in a temporary file), the last lines of stderr, the first
/// failure, and whether the lab and its streams are done.
struct Watch {
    temp: NamedTempFile,
    tail: VecDeque<String>,
    records: usize,
    failure: Option<anyhow::Error>,
    open_streams: i32,
    exit_status: Option<ExitStatus>,
    exited_at: Option<Instant>,
}

impl Watch {
    fn new(temp: NamedTempFile) -> Watch {
        Watch {
            temp,
            tail: VecDeque::new(),
            records: 0,
            failure: None,
            open_streams: 2,
            exit_status: None,
            exited_at: None,
        }
    }

    /// A stdout line: written out if it is a valid record; the first one
    /// that is not fails the run and kills the lab, and the lines after it
    /// are skipped.
    fn stdout_line(
        &mut self,
        line_number: usize,
        line: std::io::Result<String>,
        slug: &str,
        group: &GroupGuard,
    ) -> Result<()> {
        if self.failure.is_some() {
            return Ok(());
        }
        let checked = line
            .map_err(|error| anyhow!("{error}"))
            .and_then(|line| check_line(&line, line_number, slug).map(|()| line));
        match checked {
            Ok(line) => {
                writeln!(self.temp, "{line}")
                    .with_context(|| format!("writing {}", self.temp.path().display()))?;
                self.records += 1;
            }
            Err(error) => {
                self.failure =
                    Some(error.context(format!("stdout line {line_number} is not a valid record")));
                group.kill();
            }
        }
        Ok(())
    }

    /// A stderr line, kept among the last `STDERR_TAIL`.
    fn stderr_line(&mut self, line: String) {
        if self.tail.len() == STDERR_TAIL {
            self.tail.pop_front();
        }
        self.tail.push_back(line);
    }

    /// Notes the lab's exit if it exited; past `kill_after` from `started`,
    /// kills it and fails the run.
    fn check_exit(
        &mut self,
        child: &mut Child,
        group: &GroupGuard,
        started: Instant,
        kill_after: Duration,
    ) -> Result<()> {
        if let Some(status) = child.try_wait().context("waiting for the lab")? {
            self.exit_status = Some(status);
            self.exited_at = Some(Instant::now());
        } else if started.elapsed() > kill_after {
            group.kill();
            let status = child.wait().context("reaping the killed lab")?;
            self.exit_status = Some(status);
            self.exited_at = Some(Instant::now());
            self.failure
                .get_or_insert_with(|| anyhow!("did not finish within {kill_after:?}; killed"));
        }
        Ok(())
    }

    /// True, once the lab is killed and the run failed, when its streams
    /// stay open longer than `STREAM_GRACE` after it exited.
    fn streams_outlived_the_lab(&mut self, group: &GroupGuard) -> bool {
        let Some(exited) = self.exited_at else {
            return false;
        };
        if self.open_streams == 0 || exited.elapsed() <= STREAM_GRACE {
            return false;
        }
        // Something the lab started still holds its output open.
        group.kill();
        self.failure
            .get_or_insert_with(|| anyhow!("exited but left processes running (killed)"));
        true
    }

    /// The run's records if it was good; otherwise its first failure, with
    /// the last lines of its stderr.
    fn verdict(mut self, group: &GroupGuard) -> Result<NamedTempFile> {
        if self.failure.is_none() && group.any_alive() {
            self.failure = Some(anyhow!("exited but left processes running (killed)"));
        }
        group.kill();

        let status = self.exit_status.context("the lab's exit status is known")?;
        if self.failure.is_none() && !status.success() {
            self.failure = Some(anyhow!("exited with {status}"));
        }
        let records = self.records;
        if self.failure.is_none() && records < 2 {
            self.failure = Some(anyhow!(
                "printed {records} records; a run needs a meta record and at least one result"
            ));
        }
        if let Some(error) = self.failure {
            let tail: Vec<String> = self.tail.into_iter().collect();
            if tail.is_empty() {
                return Err(error);
            }
            return Err(anyhow!(
                "{error:#}{STDERR_TAIL_JOIN}\n    {}",
                tail.join("\n    ")
            ));
        }
        Ok(self.temp)
    }
}

/// What joins a failed lab's error to the last lines of its stderr.
pub const STDERR_TAIL_JOIN: &str = "; its stderr ended with:";

/// One stdout line: a valid record, and a `meta` record naming this lab first.
fn check_line(line: &str, line_number: usize, slug: &str) -> Result<()> {
    let record = parse_line(line)?;
    match (line_number, &record) {
        (1, Record::Meta(meta)) if meta.lab == slug => Ok(()),
        (1, Record::Meta(meta)) => bail!(
            "the meta record names lab {:?}, expected {slug:?}",
            meta.lab
        ),
        (1, _) => bail!("the first record must be meta"),
        (_, Record::Meta(_)) => bail!("a second meta record"),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    const META: &str = r#"{"type":"meta","data":{"lab":"demo","mode":"quick","started":"2026-11-29T18:00:00Z","params":{},"machine":{"cpu":"x","cores":2,"os":"linux","kernel":"6","rustc":"rustc 1","crates":{}}}}"#;
    const SUMMARY: &str = r#"{"type":"summary","data":{"series":"a","values":{"n":1}}}"#;

    /// A shell script as a lab; `META` and `SUMMARY` in it stand for the records.
    fn shell(script: &str) -> Command {
        let script = script.replace("META", META).replace("SUMMARY", SUMMARY);
        let mut command = Command::new("sh");
        command.arg("-c").arg(script);
        command
    }

    /// A fresh folder holding an old `demo.jsonl`.
    fn scratch(name: &str) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("xtask-runner-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let destination = dir.join("demo.jsonl");
        fs::write(&destination, "old\n").unwrap();
        (dir, destination)
    }

    /// The names in `dir`: the data file alone, no temporary file left.
    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_good_run_replaces_the_file() {
        let (dir, destination) = scratch("good");
        let mut seen = Vec::new();
        let output = run_lab_command(
            shell("echo 'META'; echo progress >&2; echo 'SUMMARY'"),
            "demo",
            Duration::from_secs(10),
            &destination,
            |line| seen.push(line.to_string()),
        )
        .unwrap();
        assert_eq!(output.records, 2);
        assert_eq!(
            fs::read_to_string(&destination).unwrap(),
            format!("{META}\n{SUMMARY}\n")
        );
        assert_eq!(seen, ["progress"]);
        assert_eq!(names_in(&dir), ["demo.jsonl"]);
        fs::remove_dir_all(dir).unwrap();
    }

    /// Runs that must fail, keep the old file and leave no temporary file:
    /// (name, script, kill timer in ms, what the error says).
    const FAILED_RUNS: [(&str, &str, u64, &str); 8] = [
        // A hung lab is killed by the timer.
        (
            "hung",
            "echo 'META'; echo working >&2; sleep 30",
            500,
            "did not finish within",
        ),
        // The lab kills itself with SIGKILL halfway, as an OOM killer would.
        (
            "killed",
            "echo 'META'; kill -9 $$; echo 'SUMMARY'",
            10_000,
            "signal: 9",
        ),
        // Invalid records fail the run.
        (
            "garbage",
            "echo 'META'; echo 'not json'",
            10_000,
            "stdout line 2",
        ),
        (
            "no-meta",
            "echo 'SUMMARY'",
            10_000,
            "first record must be meta",
        ),
        (
            "other",
            "echo 'META' | sed s/demo/other/",
            10_000,
            "expected \"demo\"",
        ),
        ("only-meta", "echo 'META'", 10_000, "printed 1 records"),
        // A failing lab's error shows its stderr.
        (
            "exit",
            "echo 'META'; echo 'error: port closed' >&2; exit 2",
            10_000,
            "error: port closed",
        ),
        // Leftover children are killed and reported.
        (
            "leftover",
            "echo 'META'; echo 'SUMMARY'; (sleep 30 &) ; exit 0",
            10_000,
            "left processes running",
        ),
    ];

    #[test]
    fn a_failed_run_keeps_the_old_file_and_says_why() {
        for (name, script, kill_after_ms, expected) in FAILED_RUNS {
            let (dir, destination) = scratch(name);
            let kill_after = Duration::from_millis(kill_after_ms);
            let started = Instant::now();
            let error = run_lab_command(shell(script), "demo", kill_after, &destination, |_| {})
                .expect_err(name);
            let message = format!("{error:#}");
            assert!(message.contains(expected), "{name}: {message}");
            assert_eq!(fs::read_to_string(&destination).unwrap(), "old\n", "{name}");
            assert_eq!(
                names_in(&dir),
                ["demo.jsonl"],
                "{name} left a temporary file"
            );
            assert!(
                started.elapsed() < kill_after + Duration::from_secs(8),
                "{name} took too long"
            );
            fs::remove_dir_all(dir).unwrap();
        }
    }
}
