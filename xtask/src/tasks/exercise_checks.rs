//! `cargo xtask exercise-checks`: only the exercises' checks, as `test` runs
//! them: built from the one release build, each must fail as shipped and pass
//! with its solution (see `exercise::check_all`).

use anyhow::Result;

use crate::{exercise, project::Project};

pub fn run(project: &Project) -> Result<()> {
    exercise::build_all(project)?;
    exercise::check_all(project)
}
