//! Runs one lab binary the way the book needs it run: in its own process
//! group, under a kill timer, every stdout line parsed as a record as it
//! arrives, the data file replaced only when the whole run was good.

use std::{
    collections::VecDeque,
    fs,
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, anyhow, bail};
use lab_kit::record::{Record, parse_line};

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
        // SAFETY: kill(2) with a negative pid signals a process group; it has
        // no memory-safety preconditions.
        unsafe {
            libc::kill(-self.0, libc::SIGKILL);
        }
    }

    fn any_alive(&self) -> bool {
        // SAFETY: signal 0 only checks that the group has a member.
        unsafe { libc::kill(-self.0, 0) == 0 }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
        crate::reaper::unregister(self.0);
    }
}

/// A temporary file next to the destination that is removed unless persisted.
struct TempFile {
    path: PathBuf,
    file: Option<fs::File>,
}

impl TempFile {
    fn create(destination: &Path) -> Result<TempFile> {
        let dir = destination.parent().context("the data file has a folder")?;
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let name = destination
            .file_name()
            .context("the data file has a name")?
            .to_string_lossy();
        let path = dir.join(format!(".{name}.tmp"));
        let file =
            fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(TempFile {
            path,
            file: Some(file),
        })
    }

    fn write_line(&mut self, line: &str) -> Result<()> {
        let file = self.file.as_mut().context("the temporary file is closed")?;
        writeln!(file, "{line}").with_context(|| format!("writing {}", self.path.display()))
    }

    /// fsync, then rename over the destination: readers see the old file or
    /// the whole new one, never half of it.
    fn persist(mut self, destination: &Path) -> Result<()> {
        let file = self.file.take().context("the temporary file is closed")?;
        file.sync_all()
            .with_context(|| format!("syncing {}", self.path.display()))?;
        drop(file);
        fs::rename(&self.path, destination).with_context(|| {
            format!(
                "renaming {} to {}",
                self.path.display(),
                destination.display()
            )
        })
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = fs::remove_file(&self.path);
        }
    }
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

    let mut temp = TempFile::create(destination)?;
    let mut tail: VecDeque<String> = VecDeque::new();
    let mut records = 0usize;
    let mut failure: Option<anyhow::Error> = None;
    let mut open_streams = 2;
    let mut exit_status = None;
    let mut exited_at: Option<Instant> = None;
    let started = Instant::now();

    while open_streams > 0 || exit_status.is_none() {
        match events.recv_timeout(Duration::from_millis(50)) {
            Ok(Event::Stdout(line_number, line)) => {
                if failure.is_some() {
                    continue;
                }
                let checked = line
                    .map_err(|error| anyhow!("{error}"))
                    .and_then(|line| check_line(&line, line_number, slug).map(|()| line));
                match checked {
                    Ok(line) => {
                        temp.write_line(&line)?;
                        records += 1;
                    }
                    Err(error) => {
                        failure =
                            Some(error.context(format!(
                                "stdout line {line_number} is not a valid record"
                            )));
                        group.kill();
                    }
                }
            }
            Ok(Event::Stderr(line)) => {
                on_stderr(&line);
                if tail.len() == STDERR_TAIL {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
            Ok(Event::StdoutClosed | Event::StderrClosed) => open_streams -= 1,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => open_streams = 0,
        }
        if exit_status.is_none() {
            if let Some(status) = child.try_wait().context("waiting for the lab")? {
                exit_status = Some(status);
                exited_at = Some(Instant::now());
            } else if started.elapsed() > kill_after {
                group.kill();
                let status = child.wait().context("reaping the killed lab")?;
                exit_status = Some(status);
                exited_at = Some(Instant::now());
                failure
                    .get_or_insert_with(|| anyhow!("did not finish within {kill_after:?}; killed"));
            }
        }
        if let Some(exited) = exited_at
            && open_streams > 0
            && exited.elapsed() > STREAM_GRACE
        {
            // Something the lab started still holds its output open.
            group.kill();
            failure.get_or_insert_with(|| anyhow!("exited but left processes running (killed)"));
            break;
        }
    }
    if failure.is_none() && group.any_alive() {
        failure = Some(anyhow!("exited but left processes running (killed)"));
    }
    group.kill();

    let status = exit_status.context("the lab's exit status is known")?;
    if failure.is_none() && !status.success() {
        failure = Some(anyhow!("exited with {status}"));
    }
    if failure.is_none() && records < 2 {
        failure = Some(anyhow!(
            "printed {records} records; a run needs a meta record and at least one result"
        ));
    }
    if let Some(error) = failure {
        let tail: Vec<String> = tail.into_iter().collect();
        if tail.is_empty() {
            return Err(error);
        }
        return Err(anyhow!(
            "{error:#}; its stderr ended with:\n    {}",
            tail.join("\n    ")
        ));
    }
    temp.persist(destination)?;
    Ok(RunOutput { records })
}

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
    use super::*;

    const META: &str = r#"{"type":"meta","data":{"lab":"demo","mode":"quick","started":"2026-11-29T18:00:00Z","params":{},"machine":{"cpu":"x","cores":2,"os":"linux","kernel":"6","rustc":"rustc 1","crates":{}}}}"#;
    const SUMMARY: &str = r#"{"type":"summary","data":{"series":"a","values":{"n":1}}}"#;

    fn shell(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.arg("-c").arg(script);
        command
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-runner-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_good_run_replaces_the_file() {
        let dir = scratch("good");
        let destination = dir.join("demo.jsonl");
        fs::write(&destination, "old\n").unwrap();
        let script = format!("echo '{META}'; echo progress >&2; echo '{SUMMARY}'");
        let mut seen = Vec::new();
        let output = run_lab_command(
            shell(&script),
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
        assert!(!dir.join(".demo.jsonl.tmp").exists());
        fs::remove_dir_all(dir).unwrap();
    }

    fn assert_fails_and_keeps_old(name: &str, script: &str, kill_after: Duration, expected: &str) {
        let dir = scratch(name);
        let destination = dir.join("demo.jsonl");
        fs::write(&destination, "old\n").unwrap();
        let started = Instant::now();
        let error =
            run_lab_command(shell(script), "demo", kill_after, &destination, |_| {}).unwrap_err();
        let message = format!("{error:#}");
        assert!(message.contains(expected), "{name}: {message}");
        assert_eq!(fs::read_to_string(&destination).unwrap(), "old\n", "{name}");
        assert!(
            !dir.join(".demo.jsonl.tmp").exists(),
            "{name} left its temporary file"
        );
        assert!(
            started.elapsed() < kill_after + Duration::from_secs(8),
            "{name} took too long"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_hung_lab_is_killed_and_the_old_file_stays() {
        let script = format!("echo '{META}'; echo working >&2; sleep 30");
        assert_fails_and_keeps_old(
            "hung",
            &script,
            Duration::from_millis(500),
            "did not finish within",
        );
    }

    #[test]
    fn a_lab_killed_mid_run_leaves_the_old_file() {
        // The lab kills itself with SIGKILL halfway, as an OOM killer would.
        let script = format!("echo '{META}'; kill -9 $$; echo '{SUMMARY}'");
        assert_fails_and_keeps_old("killed", &script, Duration::from_secs(10), "signal: 9");
    }

    #[test]
    fn invalid_records_fail_the_run() {
        let garbage = format!("echo '{META}'; echo 'not json'");
        assert_fails_and_keeps_old(
            "garbage",
            &garbage,
            Duration::from_secs(10),
            "stdout line 2",
        );
        let no_meta = format!("echo '{SUMMARY}'");
        assert_fails_and_keeps_old(
            "no-meta",
            &no_meta,
            Duration::from_secs(10),
            "first record must be meta",
        );
        let other_lab = format!("echo '{}'", META.replace("demo", "other"));
        assert_fails_and_keeps_old(
            "other",
            &other_lab,
            Duration::from_secs(10),
            "expected \"demo\"",
        );
        let only_meta = format!("echo '{META}'");
        assert_fails_and_keeps_old(
            "only-meta",
            &only_meta,
            Duration::from_secs(10),
            "printed 1 records",
        );
    }

    #[test]
    fn a_failing_lab_shows_its_stderr() {
        let script = format!("echo '{META}'; echo 'error: port closed' >&2; exit 2");
        assert_fails_and_keeps_old(
            "exit",
            &script,
            Duration::from_secs(10),
            "error: port closed",
        );
    }

    #[test]
    fn leftover_children_are_killed_and_reported() {
        let script = format!("echo '{META}'; echo '{SUMMARY}'; (sleep 30 &) ; exit 0");
        assert_fails_and_keeps_old(
            "leftover",
            &script,
            Duration::from_secs(10),
            "left processes running",
        );
    }
}
