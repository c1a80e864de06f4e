//! Running test binaries: each in its own process group, registered with the
//! reaper, its output in a temporary file, killed past [`KILL_AFTER`].

use std::{
    fs,
    io::{IsTerminal, Read, Seek},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

use super::binaries::{Part, TestBinary};

/// A test binary is killed after this long (the slowest, the background
/// facts, takes about 92 s; the slowest that runs alone, overload's, 43 s).
pub const KILL_AFTER: Duration = Duration::from_secs(300);

/// Without a terminal, how often a wait says what is still running.
const HEARTBEAT: Duration = Duration::from_secs(30);

/// A started binary.
pub struct Running {
    binary: TestBinary,
    child: Child,
    output: fs::File,
    started: Instant,
}

impl Running {
    pub fn start(binary: &TestBinary) -> Result<Running> {
        let output = tempfile::tempfile().context("creating a temporary file")?;
        let mut command = Command::new(&binary.executable);
        command
            .args(["--quiet", "--test-threads=1"])
            .args(binary.part.arguments())
            .env_remove(lab_kit::REAL_TIME)
            .current_dir(&binary.dir)
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output.try_clone()?);
        if let Part::RealTime(_) = binary.part {
            command.env(lab_kit::REAL_TIME, "1");
        }
        lab_kit::process::own_group_killed_with_parent(&mut command);
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", binary.executable.display()))?;
        crate::reaper::register(child.id() as libc::pid_t);
        Ok(Running {
            binary: binary.clone(),
            child,
            output,
            started: Instant::now(),
        })
    }

    /// Kills the binary's process group (it and every server it started).
    pub fn kill_group(&self) {
        lab_kit::process::kill_group(self.child.id() as i32);
    }

    fn finish(mut self, code: Option<i32>, killed: bool) -> Result<Finished> {
        // Whatever the tests left in the group goes with them.
        self.kill_group();
        crate::reaper::unregister(self.child.id() as libc::pid_t);
        self.output.rewind()?;
        let mut bytes = Vec::new();
        self.output.read_to_end(&mut bytes)?;
        Ok(Finished {
            binary: self.binary,
            duration: self.started.elapsed(),
            code,
            killed,
            output: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }
}

/// Waits for every binary in `batch`, handing each to `done` as it ends (or
/// is killed past [`KILL_AFTER`]); the runs in `background` are looked at
/// too, so one that ends meanwhile is handed over when it ends, but not
/// waited for.
pub fn wait_all(
    mut batch: Vec<Running>,
    background: &mut Vec<Running>,
    mut done: impl FnMut(Finished),
) -> Result<()> {
    let beat = (!std::io::stderr().is_terminal()).then_some(HEARTBEAT);
    let started = Instant::now();
    let mut said = Instant::now();
    loop {
        reap(&mut batch, &mut done)?;
        reap(background, &mut done)?;
        if batch.is_empty() {
            return Ok(());
        }
        if let Some(every) = beat
            && said.elapsed() >= every
        {
            said = Instant::now();
            let names: Vec<&str> = batch.iter().map(|run| run.binary.name.as_str()).collect();
            eprintln!(
                "    ... still running after {:.0} s: {}",
                started.elapsed().as_secs_f64(),
                names.join(", ")
            );
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Hands every run in `running` that has ended, or is past [`KILL_AFTER`]
/// and is killed, to `done`, and keeps the others.
fn reap(running: &mut Vec<Running>, done: &mut impl FnMut(Finished)) -> Result<()> {
    let mut index = 0;
    while index < running.len() {
        let status = running[index].child.try_wait()?;
        let over_time = running[index].started.elapsed() > KILL_AFTER;
        if status.is_none() && !over_time {
            index += 1;
            continue;
        }
        let mut ended = running.swap_remove(index);
        let status = match status {
            Some(status) => status,
            None => {
                ended.kill_group();
                ended.child.wait()?
            }
        };
        let killed = over_time && status.code().is_none();
        done(ended.finish(status.code(), killed)?);
    }
    Ok(())
}

/// What one binary did.
pub struct Finished {
    pub binary: TestBinary,
    pub duration: Duration,
    /// The exit code; none when killed by the timer or a signal.
    pub code: Option<i32>,
    pub killed: bool,
    pub output: String,
}

impl Finished {
    pub fn ok(&self) -> bool {
        self.code == Some(0) && self.missing_tests().is_none()
    }

    /// A part that names its tests but ran fewer names one that does not
    /// exist (renamed, moved): say so rather than pass.
    fn missing_tests(&self) -> Option<String> {
        let names = self.binary.part.named()?;
        let passed = self.passed()?;
        let table = match self.binary.part {
            Part::RealTime(_) => "background-tests",
            _ => "side-by-side-tests",
        };
        (passed != names.len()).then(|| {
            format!(
                "[package.metadata.tests.{table}] names {} tests, {passed} ran: {}",
                names.len(),
                names.join(", ")
            )
        })
    }

    /// libtest's last result line, after "test result: ".
    fn result(&self) -> Option<&str> {
        self.output
            .lines()
            .rev()
            .find_map(|line| line.trim().strip_prefix("test result: "))
    }

    /// How many tests passed, from libtest's result line.
    fn passed(&self) -> Option<usize> {
        self.result()?
            .split(';')
            .find_map(|count| {
                count
                    .trim()
                    .trim_start_matches("ok. ")
                    .strip_suffix(" passed")
            })
            .and_then(|count| count.trim().parse().ok())
    }

    /// libtest's counts ("8 passed; 0 failed"), or what went wrong.
    pub fn summary(&self) -> String {
        if self.killed {
            return format!("killed after {} s", KILL_AFTER.as_secs());
        }
        if self.code == Some(0)
            && let Some(missing) = self.missing_tests()
        {
            return missing;
        }
        match self.result() {
            Some(result) => result
                .split(';')
                .take(2)
                .collect::<Vec<_>>()
                .join(";")
                .trim_start_matches("ok. ")
                .to_string(),
            None => format!("exited {:?} without a test result", self.code),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::lab_tests::binaries::Lane;

    fn finished(part: Part, code: Option<i32>, killed: bool, output: &str) -> Finished {
        Finished {
            binary: TestBinary {
                dir: PathBuf::from("/nowhere"),
                name: "x".into(),
                executable: PathBuf::from("/nowhere/bin"),
                lane: Lane::Alone,
                part,
            },
            duration: Duration::ZERO,
            code,
            killed,
            output: output.to_string(),
        }
    }

    #[test]
    fn a_summary_is_libtest_s_counts_or_what_went_wrong() {
        let passed = finished(
            Part::Every,
            Some(0),
            false,
            "running 8 tests\n........\ntest result: ok. 8 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 14.75s\n",
        );
        assert_eq!(passed.summary(), "8 passed; 0 failed");
        assert!(passed.ok());
        let failed = finished(
            Part::Every,
            Some(101),
            false,
            "test result: FAILED. 7 passed; 1 failed; 0 ignored",
        );
        assert_eq!(failed.summary(), "FAILED. 7 passed; 1 failed");
        assert!(!failed.ok());
        assert_eq!(
            finished(Part::Every, None, true, "").summary(),
            format!("killed after {} s", KILL_AFTER.as_secs())
        );
        assert_eq!(
            finished(Part::Every, Some(1), false, "panicked").summary(),
            "exited Some(1) without a test result"
        );
    }

    #[test]
    fn a_part_that_ran_fewer_tests_than_it_names_fails() {
        let names = vec!["a::one".to_string(), "b::two".to_string()];
        let both = "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 9 filtered out";
        let one = "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 10 filtered out";
        let none = "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 11 filtered out";
        assert!(finished(Part::Only(names.clone()), Some(0), false, both).ok());
        let short = finished(Part::Only(names.clone()), Some(0), false, one);
        assert!(!short.ok());
        assert!(
            short.summary().contains("names 2 tests, 1 ran"),
            "{}",
            short.summary()
        );
        // A background test that was renamed runs nowhere.
        let renamed = finished(Part::RealTime(names), Some(0), false, none);
        assert!(!renamed.ok());
        assert!(
            renamed.summary().contains("background-tests"),
            "{}",
            renamed.summary()
        );
    }
}
