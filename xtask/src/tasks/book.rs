//! `cargo xtask book`: builds the book from the runs the command chooses (see
//! `book::runs`) and prints the path of its index.html.

use anyhow::Result;

use crate::{
    book::{self, BookCommand},
    project::Project,
    toolchain,
};

pub fn run(project: &Project, command: &BookCommand) -> Result<()> {
    toolchain::ensure(project)?;
    let index = book::runs::build(project, command)?;
    println!("{}", index.display());
    Ok(())
}
