//! `cargo xtask lab-tests`: only the tests of the labs, the facts and the
//! widgets, as `test` runs them (see `lab_tests`).

use anyhow::Result;

use crate::{lab_tests, project::Project};

pub fn run(project: &Project) -> Result<()> {
    lab_tests::run(project)
}
