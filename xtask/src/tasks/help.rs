//! `cargo xtask` alone, `help`, `-h` or `--help`: the list of tasks.

use anyhow::Result;

use crate::{cli, project::Project};

pub fn run(_project: &Project) -> Result<()> {
    print!("{}", cli::help());
    Ok(())
}
