//! `cargo xtask`: the lab book's one build tool. Runs the labs, draws the
//! charts, builds, serves and tests the book. `cargo xtask` alone lists the
//! tasks; `cli` parses them, and each task's body lives in its own module.

mod book;
mod book_task;
mod browser;
mod browser_checks;
mod charts;
mod cli;
mod data;
mod doctor;
mod exercise;
mod lab_runs;
mod lab_tests;
mod prepare;
mod project;
mod reaper;
mod release;
mod reuse;
mod runner;
mod serve;
mod steps;
mod test_task;
mod tidy;
mod toolchain;
mod widgets;

use std::process::ExitCode;

use anyhow::Result;

use cli::{HELP, Task, UsageError};
use project::Project;

fn main() -> ExitCode {
    reaper::install();
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    // The doctor reads its own command line and sets its own exit code.
    if arguments.first().map(String::as_str) == Some("doctor") {
        return doctor::run(&Project::locate(), &arguments[1..]);
    }
    match Task::parse(&arguments).and_then(|task| dispatch(&task)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            if error.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

fn dispatch(task: &Task) -> Result<()> {
    let project = Project::locate();
    match task {
        Task::Help => {
            print!("{HELP}");
            Ok(())
        }
        Task::Lab(command) => lab_runs::task(&project, command),
        Task::Charts { data } => {
            let data_dir = data.clone().unwrap_or_else(|| project.reference_data());
            if !data_dir.is_dir() {
                return Err(cli::usage(format!(
                    "--data {}: no such directory",
                    data_dir.display()
                )));
            }
            let written = charts::draw_all(&project, &data_dir)?;
            println!("{written} SVG files in {}", project.charts_dir().display());
            Ok(())
        }
        Task::Book(command) => {
            toolchain::ensure(&project)?;
            let index = book_task::run(&project, command)?;
            println!("{}", index.display());
            Ok(())
        }
        Task::Serve { book, port } => {
            let listener = serve::bind(*port)?;
            toolchain::ensure(&project)?;
            book_task::run(&project, book)?;
            println!(
                "serving the book on http://{} (Ctrl-C stops)",
                listener.local_addr()?
            );
            serve::serve_forever(listener, project.book_out())
        }
        Task::Test => {
            toolchain::ensure(&project)?;
            test_task::run(&project)
        }
        Task::Tidy => tidy::check_sources(&project)?.into_result(),
        Task::Browser => browser_checks::check_book(&project.book_out()),
        Task::LabTests => lab_tests::run(&project),
        Task::Prepare { bundle } => prepare::run(&project, bundle.as_deref()),
        Task::Exercise(command) => exercise::task(&project, command),
        Task::Labs => {
            for lab in project.labs()? {
                println!("{:<18} {}", lab.slug, lab.title);
            }
            Ok(())
        }
    }
}
