//! `cargo xtask lab <slug>... | --all`: builds the labs in release and runs
//! the chosen ones into their folder (see `runner`).

use anyhow::Result;
use lab_kit::exit::bad_input;

use crate::{
    cli::{LabChoice, LabCommand},
    project::Project,
    release, runner,
    steps::Steps,
};

/// `cargo xtask lab`: runs the labs `command` names into its folder (the
/// reference runs by default) and prints the step table.
pub fn run(project: &Project, command: &LabCommand) -> Result<()> {
    let labs = match &command.labs {
        LabChoice::All => project.labs()?,
        LabChoice::Named(names) => project.select_labs(names)?,
    };
    if labs.is_empty() {
        let known: Vec<String> = project.labs()?.into_iter().map(|lab| lab.slug).collect();
        return Err(bad_input(format!(
            "name a lab or give --all; the labs are: {}",
            known.join(", ")
        )));
    }
    let out_dir = command
        .out
        .clone()
        .unwrap_or_else(|| project.reference_data());
    let mut steps = Steps::new("lab");
    // Every lab is built, whichever of them will run: the one release build
    // every command shares (see `release`).
    let outcome = steps
        .run("build the labs (release)", || release::build(project, &[]))
        .and_then(|()| {
            runner::run_labs(
                project,
                &labs,
                command.mode,
                &command.settings.words(),
                command.name.as_deref(),
                &out_dir,
                &mut steps,
            )
        });
    steps.print_report();
    outcome
}
