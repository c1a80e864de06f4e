//! What a task says while it works: a `==> step` line when a step starts, a
//! `    done in 3.2s` line when it ends, and a closing table of every step
//! with its duration (the timing report the README's table is read from).
//! Long steps report their own progress in between (cargo's, the labs').

use std::time::{Duration, Instant};

use anyhow::Result;

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

fn first_line(error: &anyhow::Error) -> String {
    let text = format!("{error:#}");
    text.lines().next().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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
