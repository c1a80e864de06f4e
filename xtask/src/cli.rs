//! The xtask's command line: one typed command per task, parsed from the
//! words after `cargo xtask`, with a one-line error (exit 2) for anything else.
//!
//! Each task is declared once, in [`TASKS`]: its name, the words it takes,
//! its flags (a table of `lab_kit::flags::Opt`, which the kit's one parser
//! reads) and what it does. The parse and `cargo xtask --help` both come from
//! that table, so the help cannot name a flag the parser refuses.

use std::path::PathBuf;

use anyhow::Result;
use lab_kit::{
    Mode,
    exit::bad_input,
    flags::{Arg, Flags, Opt},
};

use crate::book::{BookCommand, BookData, Rerun};

/// One task of `cargo xtask`: what [`Task::parse`] accepts for it and what
/// the help says of it.
pub struct TaskSpec {
    pub name: &'static str,
    /// The words it takes besides its flags, as the help writes them (empty:
    /// none, and a word is an error).
    pub words: &'static str,
    pub flags: &'static [Opt],
    /// What it does, one paragraph.
    pub about: &'static str,
    parse: fn(&Words) -> Result<Task>,
}

const QUICK: Opt = Opt::switch("--quick", "run the labs in seconds (the default)");
const FULL: Opt = Opt::switch("--full", "run the labs at production-like scales (minutes)");
const NO_RUN: Opt = Opt::switch(
    "--no-run",
    "build from the committed reference runs in book/data",
);
#[rustfmt::skip]
const DATA: Opt = Opt::value("--data", "DIR", "build from the runs in DIR, and the reference runs \
    for the labs DIR has no run of (e.g. after `lab <slug> --full --out DIR`); given more than \
    once (each attendee's folder), the chapters show the first and the workshop's comparison \
    page puts every machine on each headline chart");
#[rustfmt::skip]
const RERUN: Opt = Opt::switch("--rerun", "run again the labs named after it (alone: every lab), \
    even if their binary did not change since your last run of them");

/// Every task, in the order the help lists them. `doctor` reads its own
/// command line (`main` hands it the words before this parser sees them); it
/// is here for the help.
#[rustfmt::skip]
pub const TASKS: &[TaskSpec] = &[
    TaskSpec { name: "lab", words: "<slug>... | --all", flags: &[
        Opt::switch("--all", "every lab"),
        QUICK,
        FULL,
        Opt::value("--out", "DIR", "write DIR/<slug>.jsonl (default book/data, the committed \
            reference runs)"),
        Opt::value("--set", "KEY=VALUE", "change one setting of one lab for this run (a field \
            of its meta record's params); needs --out, as the reference runs keep the labs' \
            own settings; may repeat"),
        Opt::value("--name", "NAME", "name this machine in the runs (with --out), for a \
            workshop's comparison charts"),
        ],
        about: "build the labs in release, run them, validate every record and write the runs",
        parse: |words| Ok(Task::Lab(words.lab()?)) },
    TaskSpec { name: "charts", words: "",
        flags: &[Opt::value("--data", "DIR", "the runs to draw (default book/data)")],
        about: "draw every chart from the runs into target/charts",
        parse: |words| Ok(Task::Charts { data: words.path("--data") }) },
    TaskSpec { name: "book", words: "[<slug>...]", flags: &[NO_RUN, DATA, RERUN, FULL],
        about: "run every lab (quick mode unless --full) into target/data, draw the charts and \
            build the book into target/book; a lab whose binary did not change since your last \
            run of it is not run again; --no-run, --data and --rerun each choose where the \
            data comes from: give one at most",
        parse: |words| Ok(Task::Book(words.book()?)) },
    TaskSpec { name: "serve", words: "[<slug>...]",
        flags: &[Opt::value("--port", "N", "the port (default 3000)"), NO_RUN, DATA, RERUN, FULL],
        about: "build the book as `book` does, then serve it on http://127.0.0.1:N until Ctrl-C",
        parse: |words| {
            let port = match words.value("--port") {
                Some(text) => text
                    .parse()
                    .map_err(|_| bad_input(format!("--port {text:?} is not a port number")))?,
                None => 3000,
            };
            Ok(Task::Serve { book: words.book()?, port })
        } },
    TaskSpec { name: "test", words: "", flags: &[], parse: |_| Ok(Task::Test),
        about: "everything CI checks: cargo fmt --check, clippy -D warnings, every test of the \
            labs and the xtask, the book from the reference runs, tidy checks, and the built \
            pages in headless Chromium (charts, themes, search, widgets)" },
    TaskSpec { name: "tidy", words: "", flags: &[], parse: |_| Ok(Task::Tidy),
        about: "only the tidy checks on the sources: includes, chapters, SUMMARY entries, \
            reference runs (and the crate versions they name), charts" },
    TaskSpec { name: "browser", words: "", flags: &[], parse: |_| Ok(Task::Browser),
        about: "only the browser checks, on the book already in target/book" },
    TaskSpec { name: "lab-tests", words: "", flags: &[], parse: |_| Ok(Task::LabTests),
        about: "only the tests of the labs, the facts and the widgets, as `test` runs them: the \
            timer-bound labs' side by side, the others alone" },
    TaskSpec { name: "exercise-checks", words: "", flags: &[], parse: |_| Ok(Task::ExerciseChecks),
        about: "only the exercises' checks, as `test` runs them: each must fail as shipped and \
            pass with its solution" },
    TaskSpec { name: "prepare", words: "",
        flags: &[Opt::value("--bundle", "DIR", "also write an offline bundle (cargo vendor + \
            config) into DIR")],
        about: "for a workshop, the day before: install what the toolchain lacks, build the \
            exercises, run every lab once (quick), build the widgets and the book; ends with \
            `ready` or exactly what is missing",
        parse: |words| Ok(Task::Prepare { bundle: words.path("--bundle") }) },
    TaskSpec { name: "labs", words: "", flags: &[], parse: |_| Ok(Task::Labs),
        about: "list the labs" },
    TaskSpec { name: "exercise", words: "[verify <name> | watch <name>]",
        flags: &[Opt::switch("--solution", "with verify: check the solution instead of your code")],
        about: "list the exercises (exercises/<name>/) with your progress; verify builds one and \
            checks your code (src/lib.rs) with the lab's own machinery; watch checks it again \
            each time you save",
        parse: |words| Ok(Task::Exercise(words.exercise()?)) },
    TaskSpec { name: "doctor", words: "<HOST:PORT | --port P ... -- COMMAND> [checks...] [flags]",
        flags: &[], parse: |_| Err(bad_input("the doctor reads its own command line")),
        about: "build the doctor and probe a running server (yours) for the failures the book \
            teaches: idle keep-alive, slow head, body and read, handler deadline, blocked \
            runtime, overload, Retry-After, shutdown; `cargo xtask doctor --help` lists its \
            flags; its exit code is the doctor's: 0 clean, 1 findings, 2 could not probe" },
];

/// `cargo xtask --help`: every task in [`TASKS`] with its words, what it
/// does and its flags.
pub fn help() -> String {
    let mut text = String::from("cargo xtask <task> [options]\n\nTasks:\n");
    for task in TASKS {
        // A task without words has no space after its name.
        text.push_str(format!("  {} {}", task.name, task.words).trim_end());
        text.push('\n');
        let about = Opt::switch("", task.about);
        text.push_str(&lab_kit::flags::help(&[about], 6));
        text.push_str(&lab_kit::flags::help(task.flags, 8));
    }
    text.push_str("\nExit codes: 0 success, 1 a task failed, 2 bad usage or input.\n");
    text
}

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
        if ["-h", "--help", "help"].contains(&task.as_str()) {
            return Ok(Task::Help);
        }
        let Some(spec) = TASKS.iter().find(|spec| spec.name == task) else {
            return Err(bad_input(format!(
                "unknown task {task:?}; run `cargo xtask` for the list"
            )));
        };
        (spec.parse)(&Words::parse(spec, rest)?)
    }
}

/// The words after the task, read by the kit's parser against the task's
/// flags: `--flag`, `--flag value`, and the rest.
struct Words {
    positional: Vec<String>,
    named: Vec<(String, String)>,
}

impl Words {
    fn parse(spec: &TaskSpec, arguments: &[String]) -> Result<Words> {
        let mut words = Words {
            positional: Vec::new(),
            named: Vec::new(),
        };
        let mut flags = Flags::new(arguments).declared(spec.flags);
        let hint =
            |error: anyhow::Error| bad_input(format!("{error:#}; run `cargo xtask` for the list"));
        while let Some(arg) = flags.next_arg().map_err(hint)? {
            match arg {
                Arg::Word(word) if spec.words.is_empty() => {
                    return Err(bad_input(format!("unexpected argument {word:?}")));
                }
                Arg::Word(word) => words.positional.push(word.to_string()),
                Arg::Flag(flag) => words
                    .named
                    .push((flag.name.to_string(), flag.value.to_string())),
            }
        }
        Ok(words)
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
            .map(|(_, value)| value.as_str())
    }

    /// Every value of a flag that may repeat (`--set a=1 --set b=2`).
    fn values(&self, name: &str) -> Vec<String> {
        self.named
            .iter()
            .filter(|(flag, _)| flag == name)
            .map(|(_, value)| value.clone())
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
