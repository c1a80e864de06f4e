//! `cargo xtask charts [--data DIR]`: draws every chart from the runs in DIR
//! (the reference runs by default) into target/charts.

use std::path::Path;

use anyhow::Result;
use lab_kit::exit::bad_input;

use crate::{charts, project::Project};

pub fn run(project: &Project, data: Option<&Path>) -> Result<()> {
    let data_dir = data.map_or_else(|| project.reference_data(), Path::to_path_buf);
    if !data_dir.is_dir() {
        return Err(bad_input(format!(
            "--data {}: no such directory",
            data_dir.display()
        )));
    }
    let written = charts::draw_all(project, &data_dir)?;
    println!("{written} SVG files in {}", project.charts_dir().display());
    Ok(())
}
