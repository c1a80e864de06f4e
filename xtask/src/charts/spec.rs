//! A lab's `charts.toml`: what each chart draws from the lab's data (see
//! ARCHITECTURE.md, "The chart and table contract").

use std::fs;

use anyhow::{Context, Result, ensure};
use serde::Deserialize;

use crate::{
    data::{Clock, PointKind},
    project::Lab,
};

/// A lab's `charts.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChartFile {
    #[serde(default)]
    pub chart: Vec<ChartSpec>,
}

/// One chart, as a lab declares it (see ARCHITECTURE.md, "The chart and table contract").
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChartSpec {
    pub name: String,
    pub title: String,
    pub kind: Kind,
    pub record: Option<PointKind>,
    #[serde(default)]
    pub series: Vec<String>,
    pub y: String,
    pub y_label: Option<String>,
    pub x: Option<String>,
    pub x_label: Option<String>,
    pub x_end: Option<String>,
    #[serde(default)]
    pub log_x: bool,
    #[serde(default)]
    pub log_y: bool,
    #[serde(default)]
    pub legend: Legend,
    #[serde(default)]
    pub mark: Vec<MarkSpec>,
    /// `simulated` for a seeded simulation: the caption then says so, and
    /// names neither a time scale nor the machine.
    #[serde(default)]
    pub clock: Clock,
    /// Segments: segments that overlap in time on one row (the nearest
    /// integer of y) get their own lane, a small offset around the row.
    #[serde(default)]
    pub lanes: bool,
    /// Named y ticks, `[[value, "name"], ...]`, for categorical rows; the y
    /// range is then fixed to half a row beyond the first and the last.
    #[serde(default)]
    pub y_ticks: Vec<(f64, String)>,
    /// Line and points charts: each point's y value written above it.
    #[serde(default)]
    pub point_labels: bool,
    /// Draws the line y = x with this label: "one per request in flight".
    pub identity_line: Option<String>,
    /// A headline bar chart that a workshop compares across machines
    /// (`cargo xtask book --data DIR --data DIR ...`).
    #[serde(default)]
    pub compare: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Bar,
    Line,
    Points,
    Segments,
}

/// Where the series names go: below the plot, outside it, so they never
/// cover data; or nowhere (a chart with one series has no legend anyway).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Legend {
    #[default]
    Below,
    None,
}

/// A vertical line at a value read from a summary record. A field holding a
/// list of numbers gives one line per number, labelled "<label> 1",
/// "<label> 2", ...
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkSpec {
    pub series: String,
    pub field: String,
    pub label: String,
}

/// Reads `labs/<slug>/charts.toml`; a lab without one has no charts.
pub fn load_specs(lab: &Lab) -> Result<Vec<ChartSpec>> {
    let path = lab.dir.join("charts.toml");
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let file: ChartFile =
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let mut seen = std::collections::HashSet::new();
    for spec in &file.chart {
        ensure!(
            spec.clock != Clock::Rows,
            "{}: chart {:?}: clock = \"rows\" is for tables only",
            path.display(),
            spec.name
        );
        ensure!(
            seen.insert(spec.name.clone()),
            "{}: two charts named {:?}",
            path.display(),
            spec.name
        );
    }
    Ok(file.chart)
}
