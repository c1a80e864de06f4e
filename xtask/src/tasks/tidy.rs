//! `cargo xtask tidy`: only the tidy checks on the sources (see `tidy`).

use anyhow::Result;

use crate::{project::Project, tidy};

pub fn run(project: &Project) -> Result<()> {
    tidy::check_sources(project)?.into_result()
}
