//! `cargo xtask exercise [verify <name> [--solution] | watch <name>]`: lists
//! the exercises with the reader's progress, verifies one, or watches one
//! (see `exercise`).

use anyhow::Result;

use crate::{cli::ExerciseCommand, exercise, project::Project};

pub fn run(project: &Project, command: &ExerciseCommand) -> Result<()> {
    let all = exercise::exercises(project)?;
    match command {
        ExerciseCommand::List => {
            print!("{}", exercise::list(project, &all));
            Ok(())
        }
        ExerciseCommand::Verify { name, solution } => {
            exercise::build_and_verify(project, exercise::find(&all, name)?, *solution)
        }
        ExerciseCommand::Watch { name } => exercise::watch(project, exercise::find(&all, name)?),
    }
}
