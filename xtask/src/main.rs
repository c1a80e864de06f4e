//! `cargo xtask`: the lab book's one build tool. Runs the labs, draws the
//! charts, builds, serves and tests the book. `cargo xtask` alone lists the
//! tasks; `cli` parses them, and `main` hands each to its entry point,
//! `tasks::<task>::run`; the library modules do the work.

mod book;
mod browser;
mod charts;
mod cli;
mod data;
mod exercise;
mod lab_tests;
mod project;
mod reaper;
mod release;
mod reuse;
mod runner;
mod serve;
mod steps;
mod tasks;
mod tidy;
mod toolchain;
mod widgets;

use std::process::ExitCode;

use anyhow::Result;

use cli::Task;
use lab_kit::exit::{self, Exit};
use project::Project;

/// Who speaks in the xtask's error line.
const PROGRAM: &str = "xtask";

fn main() -> ExitCode {
    reaper::install();
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    // The doctor reads its own command line and sets its own exit code.
    if arguments.first().map(String::as_str) == Some("doctor") {
        return tasks::doctor::run(&Project::locate(), &arguments[1..]);
    }
    match Task::parse(&arguments).and_then(|task| dispatch(&task)) {
        Ok(()) => Exit::Success.into(),
        // The xtask tells bad usage or input (2) from a task that failed (1).
        Err(error) => {
            exit::report(PROGRAM, &error);
            if exit::is_bad_input(&error) {
                Exit::Error
            } else {
                Exit::Failed
            }
            .into()
        }
    }
}

fn dispatch(task: &Task) -> Result<()> {
    let project = Project::locate();
    match task {
        Task::Help => tasks::help::run(&project),
        Task::Lab(command) => tasks::lab::run(&project, command),
        Task::Charts { data } => tasks::charts::run(&project, data.as_deref()),
        Task::Book(command) => tasks::book::run(&project, command),
        Task::Serve { book, port } => tasks::serve::run(&project, book, *port),
        Task::Test => tasks::test::run(&project),
        Task::Tidy => tasks::tidy::run(&project),
        Task::Browser => tasks::browser::run(&project),
        Task::LabTests => tasks::lab_tests::run(&project),
        Task::ExerciseChecks => tasks::exercise_checks::run(&project),
        Task::Prepare { bundle } => tasks::prepare::run(&project, bundle.as_deref()),
        Task::Exercise(command) => tasks::exercise::run(&project, command),
        Task::Labs => tasks::labs::run(&project),
    }
}
