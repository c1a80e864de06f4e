//! What a task says while it works: a `==> step` line when a step starts, a
//! `    done in 3.2s` line when it ends, and a closing table of every step
//! with its duration (the timing report the README's table is read from).
//! Long steps report their own progress in between (cargo's, the labs').
//! A child command that can stay quiet for minutes (cargo compiling one large
//! crate) runs under [`status_with_heartbeat`], so a log never sits on one
//! line while work goes on.

use std::{
    io::IsTerminal,
    process::{Command, ExitStatus},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

/// Without a terminal (CI, a log file), how often a running command is said
/// to be still running. On a terminal cargo redraws its own progress bar.
const HEARTBEAT: Duration = Duration::from_secs(30);

/// Runs `command` to its end, like `Command::status`. When stderr is not a
/// terminal, a line every [`HEARTBEAT`] says that `what` is still running and
/// for how long.
pub fn status_with_heartbeat(command: &mut Command, what: &str) -> Result<ExitStatus> {
    let beat = (!std::io::stderr().is_terminal()).then_some(HEARTBEAT);
    status_saying(command, what, beat, |line| eprintln!("{line}"))
}

/// [`status_with_heartbeat`] with the interval (none: no heartbeat) and the
/// place the lines go as parameters.
fn status_saying(
    command: &mut Command,
    what: &str,
    every: Option<Duration>,
    say: impl Fn(String) + Send + 'static,
) -> Result<ExitStatus> {
    let started = Instant::now();
    let (stop, stopped) = mpsc::channel::<()>();
    let beat = every.map(|every| {
        let what = what.to_string();
        thread::spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                say(format!(
                    "    ... {what}: still running after {}",
                    seconds(started.elapsed())
                ));
            }
        })
    });
    let status = command.status().with_context(|| format!("starting {what}"));
    drop(stop);
    if let Some(beat) = beat {
        let _ = beat.join();
    }
    status
}

/// The steps of one task, in the order they ran.
pub struct Steps {
    task: &'static str,
    started: Instant,
    rows: Vec<Row>,
}

struct Row {
    name: String,
    duration: Duration,
    ok: bool,
}

impl Steps {
    pub fn new(task: &'static str) -> Steps {
        Steps {
            task,
            started: Instant::now(),
            rows: Vec::new(),
        }
    }

    /// Runs one step, announcing it and timing it. A failed step is reported
    /// here in one line and its error returned for the caller to handle.
    pub fn run<T>(&mut self, name: &str, work: impl FnOnce() -> Result<T>) -> Result<T> {
        eprintln!("==> {name}");
        let started = Instant::now();
        let outcome = work();
        let duration = started.elapsed();
        match &outcome {
            Ok(_) => eprintln!("    done in {}", seconds(duration)),
            Err(error) => eprintln!(
                "    FAILED after {}: {}",
                seconds(duration),
                first_line(error)
            ),
        }
        self.rows.push(Row {
            name: name.to_string(),
            duration,
            ok: outcome.is_ok(),
        });
        outcome
    }

    pub fn failed(&self) -> usize {
        self.rows.iter().filter(|row| !row.ok).count()
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// The timing report, on stderr so that stdout stays the task's result.
    pub fn print_report(&self) {
        eprintln!("{}", self.report());
    }

    fn report(&self) -> String {
        let width = self
            .rows
            .iter()
            .map(|row| row.name.chars().count())
            .max()
            .unwrap_or(0)
            .max(self.task.len() + 6);
        let mut text = format!("\n{:<width$} {:>9}  outcome\n", "step", "duration");
        for row in &self.rows {
            let verdict = if row.ok { "ok" } else { "FAILED" };
            text += &format!(
                "{:<width$} {:>9}  {verdict}\n",
                row.name,
                seconds(row.duration)
            );
        }
        let verdict = if self.failed() == 0 { "ok" } else { "FAILED" };
        text += &format!(
            "{:<width$} {:>9}  {verdict}",
            format!("{} total", self.task),
            seconds(self.started.elapsed())
        );
        text
    }
}

fn seconds(duration: Duration) -> String {
    format!("{:.1}s", duration.as_secs_f64())
}

/// The first line of an error's chain, for a one-line summary.
pub fn first_line(error: &anyhow::Error) -> String {
    let text = format!("{error:#}");
    text.lines().next().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_command_is_said_to_be_running_until_it_ends() {
        let (lines, said) = mpsc::channel();
        let started = Instant::now();
        let status = status_saying(
            Command::new("sleep").arg("0.55"),
            "sleep",
            Some(Duration::from_millis(100)),
            move |line| {
                let _ = lines.send(line);
            },
        )
        .expect("sleep runs");
        assert!(status.success());
        // The heartbeat stops with the command, not a whole interval later.
        assert!(started.elapsed() < Duration::from_secs(3));
        let said: Vec<String> = said.try_iter().collect();
        assert!(said.len() >= 2, "{said:?}");
        assert!(said[0].starts_with("    ... sleep: still running after 0."));
        let error = status_saying(
            &mut Command::new("/nonexistent/cargo"),
            "cargo build",
            None,
            |_| {},
        )
        .expect_err("a missing program is an error");
        assert!(format!("{error}").contains("starting cargo build"));
    }

    #[test]
    fn every_step_is_reported_with_its_outcome_and_the_total() {
        let mut steps = Steps::new("book");
        assert_eq!(steps.run("charts", || Ok(3)).unwrap(), 3);
        let error = steps
            .run("widgets", || -> Result<()> {
                anyhow::bail!("no wasm\nsecond line")
            })
            .unwrap_err();
        assert_eq!(format!("{error}"), "no wasm\nsecond line");
        assert_eq!((steps.len(), steps.failed()), (2, 1));
        let report = steps.report();
        let lines: Vec<&str> = report.lines().skip(1).collect();
        assert!(lines[0].starts_with("step"), "{report}");
        assert!(lines[1].starts_with("charts") && lines[1].ends_with("ok"));
        assert!(lines[2].starts_with("widgets") && lines[2].ends_with("FAILED"));
        assert!(lines[3].starts_with("book total") && lines[3].ends_with("FAILED"));
    }
}
