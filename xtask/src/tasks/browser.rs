//! `cargo xtask browser`: only the browser checks, on the book already built
//! in target/book (see `browser::checks`).

use anyhow::Result;

use crate::{browser, project::Project};

pub fn run(project: &Project) -> Result<()> {
    browser::checks::check_book(&project.book_out())
}
