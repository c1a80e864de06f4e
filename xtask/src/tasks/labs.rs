//! `cargo xtask labs`: one line per lab, its slug and its title.

use anyhow::Result;

use crate::project::Project;

pub fn run(project: &Project) -> Result<()> {
    for lab in project.labs()? {
        println!("{:<18} {}", lab.slug, lab.title);
    }
    Ok(())
}
