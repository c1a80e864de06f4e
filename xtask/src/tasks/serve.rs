//! `cargo xtask serve [--port N]`: builds the book as `book` does, then serves
//! it on 127.0.0.1 until Ctrl-C (see `serve`).

use anyhow::Result;

use crate::{
    book::{self, BookCommand},
    project::Project,
    serve, toolchain,
};

pub fn run(project: &Project, book: &BookCommand, port: u16) -> Result<()> {
    // The port first: one already taken is said before anything is built.
    let listener = serve::bind(port)?;
    toolchain::ensure(project)?;
    book::runs::build(project, book)?;
    println!(
        "serving the book on http://{} (Ctrl-C stops)",
        listener.local_addr()?
    );
    serve::serve_forever(listener, project.book_out())
}
