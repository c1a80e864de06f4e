//! Charts: each lab's `charts.toml` says what to draw from its data; this
//! module checks that the data can feed every chart and draws each one twice,
//! for mdBook's light and dark themes, as SVG.

mod colours;
pub mod compare;
mod draw;
mod layout;
mod prepare;
mod spec;
#[cfg(test)]
mod tests;

use std::{fs, path::Path};

use anyhow::{Context, Result};

use crate::{data::RunData, project::Project};

pub use colours::Colours;
pub use draw::{THEMES, Theme};
pub use prepare::{Prepared, PreparedSeries};
pub use spec::{ChartSpec, Kind, Legend, load_specs};

/// The file name of one rendering of a chart, relative to the charts folder.
pub fn svg_name(slug: &str, chart: &str, theme: &Theme) -> String {
    format!("{slug}/{chart}.{}.svg", theme.name)
}

/// Draws every chart of every lab from `data_dir` into the charts folder.
/// Returns how many SVG files were written.
pub fn draw_all(project: &Project, data_dir: &Path) -> Result<usize> {
    let out = project.charts_dir();
    if out.exists() {
        fs::remove_dir_all(&out).with_context(|| format!("clearing {}", out.display()))?;
    }
    let mut written = 0;
    for lab in project.labs()? {
        let specs = load_specs(&lab)?;
        if specs.is_empty() {
            continue;
        }
        let data_path = data_dir.join(format!("{}.jsonl", lab.slug));
        if !data_path.is_file() {
            return Err(lab_kit::exit::bad_input(format!(
                "{}: no run of {} (make one with `cargo xtask lab {} --out {}`)",
                data_path.display(),
                lab.slug,
                lab.slug,
                data_dir.display()
            )));
        }
        let run = RunData::load(&data_path)?;
        fs::create_dir_all(out.join(&lab.slug))?;
        let mut colours = Colours::default();
        for spec in &specs {
            let mut prepared = spec.prepare(&run).with_context(|| {
                format!(
                    "chart {}/{} from {}",
                    lab.slug,
                    spec.name,
                    data_path.display()
                )
            })?;
            colours.assign(&mut prepared, draw::PALETTE_SIZE);
            for theme in THEMES {
                let svg = draw::render(spec, &prepared, &theme, &run.caption_for(spec.clock))
                    .with_context(|| format!("drawing chart {}/{}", lab.slug, spec.name))?;
                let path = out.join(svg_name(&lab.slug, &spec.name, &theme));
                fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
                written += 1;
            }
        }
    }
    Ok(written)
}
