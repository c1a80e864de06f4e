//! The xtask's command line: one typed command per task, parsed from the
//! words after `cargo xtask`, with a one-line error (exit 2) for anything else.

use std::path::PathBuf;

use anyhow::Result;
use lab_kit::Mode;

use crate::book::{BookCommand, BookData, Rerun};
use lab_kit::exit::bad_input;

pub const HELP: &str = "\
cargo xtask <task> [options]

Tasks:
  lab <slug>... | --all [--quick | --full] [--out DIR] [--set KEY=VALUE]... [--name NAME]
        build the labs in release, run them, validate every record, and write
        DIR/<slug>.jsonl (default book/data, the committed reference runs);
        --set changes one setting of one lab for this run (a field of its
        meta record's params), and needs --out: the reference runs keep the
        labs' own settings; --name NAME (with --out) names this machine in
        the runs, for a workshop's comparison charts
  charts [--data DIR]
        draw every chart from DIR (default book/data) into target/charts
  book [--no-run | --data DIR... | --rerun [<slug>...]] [--full]
        run every lab (quick mode unless --full) into target/data, draw the
        charts and build the book into target/book; a lab whose binary did
        not change since your last run of it is not run again, unless
        --rerun names it (or, alone, every lab); with --no-run, build from
        the committed reference runs in book/data instead; with --data DIR,
        build from the runs in DIR and the reference runs for the labs DIR
        has no run of (e.g. after `lab <slug> --full --out DIR`); with --data
        given more than once (each attendee's folder), the chapters show the
        first and the workshop's comparison page puts every machine on each
        headline chart
  serve [--port N] [--no-run | --data DIR]
        build the book as `book` does, then serve it on http://127.0.0.1:N
        (default 3000) until Ctrl-C
  test  everything CI checks: cargo fmt --check, clippy -D warnings, every
        test of the labs and the xtask, the book from the reference runs, tidy
        checks, and the built pages in headless Chromium (charts, themes,
        search, widgets)
  tidy  only the tidy checks on the sources: includes, chapters, SUMMARY
        entries, reference runs (and the crate versions they name), charts
  browser
        only the browser checks, on the book already in target/book
  lab-tests
        only the tests of the labs, the facts and the widgets, as `test` runs
        them: the timer-bound labs' side by side, the others alone
  exercise-checks
        only the exercises' checks, as `test` runs them: each must fail as
        shipped and pass with its solution
  prepare [--bundle DIR]
        for a workshop, the day before: install what the toolchain lacks,
        build the exercises, run every lab once (quick), build the widgets
        and the book; ends with `ready` or exactly what is missing; with
        --bundle DIR also writes an offline bundle (cargo vendor + config)
  labs  list the labs
  exercise [verify <name> [--solution] | watch <name>]
        list the exercises (exercises/<name>/) with your progress; verify
        builds one and checks your code (src/lib.rs) with the lab's own
        machinery, or the solution with --solution; watch checks it again
        each time you save
  doctor <HOST:PORT | --port P ... -- COMMAND> [checks...] [flags]
        build the doctor and probe a running server (yours) for the
        failures the book teaches: idle keep-alive, slow head, body and
        read, handler deadline, blocked runtime, overload, Retry-After,
        shutdown; `cargo xtask doctor --help` lists its flags; its exit
        code is the doctor's: 0 clean, 1 findings, 2 could not probe

Exit codes: 0 success, 1 a task failed, 2 bad usage or input.
";

/// One task and its options, as typed as the task needs them.
#[derive(Debug, PartialEq)]
pub enum Task {
    Help,
    Lab(LabCommand),
    Charts { data: Option<PathBuf> },
    Book(BookCommand),
    Serve { book: BookCommand, port: u16 },
    Test,
    Tidy,
    Browser,
    LabTests,
    ExerciseChecks,
    Labs,
    Exercise(ExerciseCommand),
    Prepare { bundle: Option<PathBuf> },
}

/// `cargo xtask lab`: which labs, in which mode, into which folder.
#[derive(Debug, PartialEq)]
pub struct LabCommand {
    pub labs: LabChoice,
    pub mode: Mode,
    /// None: the committed reference runs in book/data.
    pub out: Option<PathBuf>,
    /// `--set key=value` pairs, passed to the lab as they are.
    pub settings: lab_kit::Settings,
    /// `--name NAME`: this machine's name in the runs' meta records.
    pub name: Option<String>,
}

#[derive(Debug, PartialEq)]
pub enum LabChoice {
    All,
    Named(Vec<String>),
}

/// `cargo xtask exercise ...`, parsed.
#[derive(Debug, PartialEq)]
pub enum ExerciseCommand {
    List,
    Verify { name: String, solution: bool },
    Watch { name: String },
}

impl Task {
    pub fn parse(arguments: &[String]) -> Result<Task> {
        let Some((task, rest)) = arguments.split_first() else {
            return Ok(Task::Help);
        };
        let words = Words::parse(rest)?;
        let task = match task.as_str() {
            "-h" | "--help" | "help" => Task::Help,
            "lab" => {
                words.allow(
                    &["--all", "--quick", "--full", "--out", "--set", "--name"],
                    true,
                )?;
                Task::Lab(words.lab()?)
            }
            "charts" => {
                words.allow(&["--data"], false)?;
                Task::Charts {
                    data: words.path("--data"),
                }
            }
            "book" => {
                words.allow(&["--no-run", "--data", "--full", "--rerun"], true)?;
                Task::Book(words.book()?)
            }
            "serve" => {
                words.allow(&["--no-run", "--data", "--full", "--port", "--rerun"], true)?;
                let port = match words.value("--port") {
                    Some(text) => text
                        .parse()
                        .map_err(|_| bad_input(format!("--port {text:?} is not a port number")))?,
                    None => 3000,
                };
                Task::Serve {
                    book: words.book()?,
                    port,
                }
            }
            "test" | "tidy" | "browser" | "lab-tests" | "exercise-checks" | "labs" => {
                words.allow(&[], false)?;
                match task.as_str() {
                    "test" => Task::Test,
                    "tidy" => Task::Tidy,
                    "browser" => Task::Browser,
                    "lab-tests" => Task::LabTests,
                    "exercise-checks" => Task::ExerciseChecks,
                    _ => Task::Labs,
                }
            }
            "prepare" => {
                words.allow(&["--bundle"], false)?;
                Task::Prepare {
                    bundle: words.path("--bundle"),
                }
            }
            "exercise" => {
                words.allow(&["--solution"], true)?;
                Task::Exercise(words.exercise()?)
            }
            other => {
                return Err(bad_input(format!(
                    "unknown task {other:?}; run `cargo xtask` for the list"
                )));
            }
        };
        Ok(task)
    }
}

/// The words after the task: `--flag`, `--flag value`, and the rest.
struct Words {
    positional: Vec<String>,
    named: Vec<(String, Option<String>)>,
}

impl Words {
    const WITH_VALUE: [&'static str; 6] =
        ["--out", "--data", "--port", "--set", "--bundle", "--name"];

    fn parse(arguments: &[String]) -> Result<Words> {
        let mut words = Words {
            positional: Vec::new(),
            named: Vec::new(),
        };
        let mut rest = arguments.iter();
        while let Some(word) = rest.next() {
            if Self::WITH_VALUE.contains(&word.as_str()) {
                let value = rest
                    .next()
                    .ok_or_else(|| bad_input(format!("{word} needs a value")))?;
                words.named.push((word.clone(), Some(value.clone())));
            } else if word.starts_with("--") {
                words.named.push((word.clone(), None));
            } else {
                words.positional.push(word.clone());
            }
        }
        Ok(words)
    }

    fn allow(&self, known: &[&str], positional: bool) -> Result<()> {
        for (name, _) in &self.named {
            if !known.contains(&name.as_str()) {
                return Err(bad_input(format!(
                    "unknown option {name}; run `cargo xtask` for the list"
                )));
            }
        }
        match self.positional.first() {
            Some(word) if !positional => Err(bad_input(format!("unexpected argument {word:?}"))),
            _ => Ok(()),
        }
    }

    /// `[verify <name> [--solution] | watch <name>]`.
    fn exercise(&self) -> Result<ExerciseCommand> {
        let solution = self.has("--solution");
        let command = match self.positional.as_slice() {
            [] => ExerciseCommand::List,
            [verb, name] if verb == "verify" => ExerciseCommand::Verify {
                name: name.clone(),
                solution,
            },
            [verb, name] if verb == "watch" => ExerciseCommand::Watch { name: name.clone() },
            _ => {
                return Err(bad_input(
                    "usage: cargo xtask exercise [verify <name> [--solution] | watch <name>]",
                ));
            }
        };
        if solution && !matches!(command, ExerciseCommand::Verify { .. }) {
            return Err(bad_input("--solution goes with exercise verify <name>"));
        }
        Ok(command)
    }

    /// `lab <slug>... | --all [--quick | --full] [--out DIR] [--set
    /// KEY=VALUE]... [--name NAME]`.
    fn lab(&self) -> Result<LabCommand> {
        let labs = match (self.has("--all"), self.positional.is_empty()) {
            (true, false) => return Err(bad_input("name labs or give --all, not both")),
            (true, true) => LabChoice::All,
            (false, _) => LabChoice::Named(self.positional.clone()),
        };
        let mut settings = lab_kit::Settings::default();
        for pair in self.values("--set") {
            settings
                .push(&pair)
                .map_err(|error| bad_input(format!("{error:#}")))?;
        }
        let out = self.path("--out");
        let name = self.value("--name").map(str::to_string);
        if name.is_some() && out.is_none() {
            return Err(bad_input(
                "--name needs --out DIR (for example target/mine): the reference runs in book/data name no machine",
            ));
        }
        if !settings.is_empty() {
            if !matches!(&labs, LabChoice::Named(names) if names.len() == 1) {
                return Err(bad_input(
                    "--set changes one lab's settings: name exactly one lab",
                ));
            }
            if out.is_none() {
                return Err(bad_input(
                    "--set needs --out DIR (for example target/mine): the reference runs in book/data keep the lab's own settings",
                ));
            }
        }
        Ok(LabCommand {
            labs,
            mode: self.mode()?,
            out,
            settings,
            name,
        })
    }

    fn has(&self, name: &str) -> bool {
        self.named.iter().any(|(flag, _)| flag == name)
    }

    fn value(&self, name: &str) -> Option<&str> {
        self.named
            .iter()
            .find(|(flag, _)| flag == name)
            .and_then(|(_, value)| value.as_deref())
    }

    /// Every value of a flag that may repeat (`--set a=1 --set b=2`).
    fn values(&self, name: &str) -> Vec<String> {
        self.named
            .iter()
            .filter(|(flag, _)| flag == name)
            .filter_map(|(_, value)| value.clone())
            .collect()
    }

    fn path(&self, name: &str) -> Option<PathBuf> {
        self.value(name).map(PathBuf::from)
    }

    fn mode(&self) -> Result<Mode> {
        match (self.has("--quick"), self.has("--full")) {
            (true, true) => Err(bad_input("choose one of --quick and --full")),
            (_, true) => Ok(Mode::Full),
            _ => Ok(Mode::Quick),
        }
    }

    fn book(&self) -> Result<BookCommand> {
        let mut dirs: Vec<PathBuf> = self
            .values("--data")
            .into_iter()
            .map(PathBuf::from)
            .collect();
        let data = match (self.has("--no-run"), dirs.len()) {
            (true, 1..) => {
                return Err(bad_input(
                    "--no-run and --data each choose the data; give one",
                ));
            }
            (true, 0) => BookData::Reference,
            (false, 0) => BookData::FreshRuns,
            (false, 1) => BookData::Overlay(dirs.remove(0)),
            (false, _) => BookData::Compare(dirs),
        };
        let rerun = match (self.has("--rerun"), self.positional.as_slice()) {
            (false, []) => Rerun::Changed,
            (false, [word, ..]) => return Err(bad_input(format!("unexpected argument {word:?}"))),
            (true, _) if data != BookData::FreshRuns => {
                return Err(bad_input(
                    "--rerun runs labs; --no-run and --data build from runs already made",
                ));
            }
            (true, []) => Rerun::All,
            (true, names) => Rerun::Named(names.to_vec()),
        };
        Ok(BookCommand {
            data,
            mode: self.mode()?,
            rerun,
        })
    }
}

#[cfg(test)]
mod tests;
