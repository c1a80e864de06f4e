//! Charts: each lab's `charts.toml` says what to draw from its data; this
//! module checks that the data can feed every chart and draws each one twice,
//! for mdBook's light and dark themes, as SVG.

mod draw;
mod layout;

use std::{fs, path::Path};

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;

use crate::{
    data::{Clock, PointKind, RunData},
    project::{Lab, Project},
};

pub use draw::{THEMES, Theme};

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
/// string of numbers ("250.4 598.2 ...") gives one line per number, labelled
/// "<label> 1", "<label> 2", ...
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkSpec {
    pub series: String,
    pub field: String,
    pub label: String,
}

/// A chart's data, pulled out of a run and checked.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub series: Vec<PreparedSeries>,
    pub marks: Vec<(String, f64)>,
}

#[derive(Debug, Clone)]
pub struct PreparedSeries {
    pub name: String,
    /// (x, y, x_end); x is the bar index for bar charts.
    pub points: Vec<(f64, f64, f64)>,
    /// The palette slot it is drawn in: its place in the chart until
    /// [`Colours`] gives it the one its name has in every chart of the lab.
    pub colour: usize,
}

impl ChartSpec {
    fn record_kind(&self) -> PointKind {
        self.record.unwrap_or(match self.kind {
            Kind::Bar => PointKind::Summary,
            Kind::Line | Kind::Points | Kind::Segments => PointKind::Sample,
        })
    }

    /// Checks the spec against the run and extracts what the chart draws.
    pub fn prepare(&self, run: &RunData) -> Result<Prepared> {
        let kind = self.record_kind();
        if self.kind != Kind::Bar {
            ensure!(self.x.is_some(), "a {:?} chart needs an x field", self.kind);
        }
        if self.kind == Kind::Segments {
            ensure!(
                self.x_end.is_some(),
                "a segments chart needs an x_end field"
            );
        }
        ensure!(
            !(self.kind == Kind::Bar && (self.log_x || self.log_y)),
            "bar charts have no log scale"
        );
        let points = run.points(kind);
        let mut names: Vec<String> = Vec::new();
        if self.series.is_empty() {
            for point in points {
                if !names.contains(&point.series) {
                    names.push(point.series.clone());
                }
            }
        } else {
            names = self.series.clone();
        }
        ensure!(!names.is_empty(), "the run has no {kind:?} records to draw");
        let mut series = Vec::new();
        for (index, name) in names.iter().enumerate() {
            let mut prepared = PreparedSeries {
                name: name.clone(),
                points: Vec::new(),
                colour: index,
            };
            for point in points.iter().filter(|point| &point.series == name) {
                let y = point.number(&self.y)?;
                let x = match &self.x {
                    Some(field) if self.kind != Kind::Bar => point.number(field)?,
                    _ => index as f64,
                };
                let x_end = match &self.x_end {
                    Some(field) => point.number(field)?,
                    None => x,
                };
                if (self.log_x && x <= 0.0) || (self.log_y && y <= 0.0) {
                    bail!("series {name:?} has a value at or below 0 on a log axis");
                }
                prepared.points.push((x, y, x_end));
            }
            ensure!(
                !prepared.points.is_empty(),
                "series {name:?} has no {kind:?} records"
            );
            if self.kind == Kind::Bar {
                ensure!(
                    prepared.points.len() == 1,
                    "series {name:?} has {} {kind:?} records; a bar needs one",
                    prepared.points.len()
                );
            }
            prepared.points.sort_by(|a, b| a.0.total_cmp(&b.0));
            series.push(prepared);
        }
        if self.lanes {
            ensure!(self.kind == Kind::Segments, "lanes are for segments charts");
            spread_into_lanes(&mut series);
        }
        for window in self.y_ticks.windows(2) {
            ensure!(
                window[0].0 < window[1].0,
                "y_ticks must be in increasing order"
            );
        }
        let mut marks = Vec::new();
        for mark in &self.mark {
            let point = run
                .summaries
                .iter()
                .find(|point| point.series == mark.series)
                .with_context(|| {
                    format!(
                        "mark {:?}: no summary for series {:?}",
                        mark.label, mark.series
                    )
                })?;
            match point.values.get(&mark.field) {
                Some(list @ lab_kit::Value::List(_)) => {
                    let values = list.as_numbers().with_context(|| {
                        format!(
                            "mark {:?}: field {:?} of {:?} is not a list of numbers",
                            mark.label, mark.field, mark.series
                        )
                    })?;
                    for (index, value) in values.iter().enumerate() {
                        marks.push((format!("{} {}", mark.label, index + 1), *value));
                    }
                }
                _ => marks.push((mark.label.clone(), point.number(&mark.field)?)),
            }
        }
        Ok(Prepared { series, marks })
    }
}

/// Moves every segment to its row (the nearest integer of y) plus the offset
/// of its lane, lanes taken across all series so no bar hides another.
fn spread_into_lanes(series: &mut [PreparedSeries]) {
    let segments: Vec<(f64, f64, f64)> = series
        .iter()
        .flat_map(|one| one.points.iter().map(|&(x, y, x_end)| (x, x_end, y)))
        .collect();
    let lanes = layout::assign_lanes(&segments);
    let mut next = lanes.into_iter();
    for one in series.iter_mut() {
        for point in one.points.iter_mut() {
            let (lane, count) = next.next().expect("one lane per segment");
            point.1 = point.1.round() + layout::lane_offset(lane, count);
        }
    }
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
            seen.insert(spec.name.clone()),
            "{}: two charts named {:?}",
            path.display(),
            spec.name
        );
    }
    Ok(file.chart)
}

/// The file name of one rendering of a chart, relative to the charts folder.
pub fn svg_name(slug: &str, chart: &str, theme: &Theme) -> String {
    format!("{slug}/{chart}.{}.svg", theme.name)
}

/// One colour per series name across every chart of a lab, so a strategy a
/// chapter compares looks the same in each of its charts. A series is known
/// by the name its chart shows (`idle` for `hyper-timer/idle` in a chart of
/// `hyper-timer/...` series). A name met for the first time takes the slot of
/// its place in its chart, as charts did before, so series that play the same
/// part under other names (`health-rayon` in one timeline, `health-chunked` in
/// the next) still match; a name met again keeps its slot. Two series of one
/// chart never share a slot: the later one takes the next free slot.
#[derive(Default)]
pub struct Colours {
    slots: std::collections::HashMap<String, usize>,
}

impl Colours {
    pub fn assign(&mut self, prepared: &mut Prepared, palette_size: usize) {
        let names: Vec<String> = prepared
            .series
            .iter()
            .map(|series| series.name.clone())
            .collect();
        let shown = layout::legend_names(&names);
        let mut taken = Vec::new();
        for (index, (series, name)) in prepared.series.iter_mut().zip(shown).enumerate() {
            let key = name.trim_start_matches('/').to_string();
            let wanted = *self.slots.entry(key).or_insert(index % palette_size);
            let slot = (0..palette_size)
                .map(|step| (wanted + step) % palette_size)
                .find(|slot| !taken.contains(slot))
                .unwrap_or(wanted);
            taken.push(slot);
            series.colour = slot;
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const META: &str = r#"{"type":"meta","data":{"lab":"demo","mode":"quick","started":"2026-11-29T18:00:00Z","time_scale":1.0,"params":{},"machine":{"cpu":"Test CPU","cores":2,"os":"linux","kernel":"6.1","rustc":"rustc 1","crates":{}}}}"#;

    fn run(lines: &[&str]) -> RunData {
        let mut text = format!("{META}\n");
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        RunData::parse(&text).expect("a valid run")
    }

    fn prepared(names: &[&str]) -> Prepared {
        Prepared {
            series: names
                .iter()
                .enumerate()
                .map(|(index, name)| PreparedSeries {
                    name: name.to_string(),
                    points: Vec::new(),
                    colour: index,
                })
                .collect(),
            marks: Vec::new(),
        }
    }

    fn slots(prepared: &Prepared) -> Vec<usize> {
        prepared.series.iter().map(|series| series.colour).collect()
    }

    #[test]
    fn a_series_keeps_its_colour_in_every_chart_of_a_lab() {
        let mut colours = Colours::default();
        let mut all = prepared(&["inline", "spawn-blocking", "rayon", "chunked"]);
        colours.assign(&mut all, 7);
        assert_eq!(slots(&all), [0, 1, 2, 3]);
        // A chart of the fixes only: each keeps the colour it had.
        let mut fixes = prepared(&["rayon", "chunked", "spawn-blocking"]);
        colours.assign(&mut fixes, 7);
        assert_eq!(slots(&fixes), [2, 3, 1]);
        // Known by the name the chart shows (a shared `family/` prefix goes);
        // a new name takes its place in the chart when that slot is free.
        let mut family = prepared(&["run/chunked", "run/inline", "run/new"]);
        colours.assign(&mut family, 7);
        assert_eq!(slots(&family), [3, 0, 2]);
        // Parts played under other names match by place, as before.
        let mut first = prepared(&["health-a", "lag-a"]);
        let mut second = prepared(&["health-b", "lag-b"]);
        colours.assign(&mut first, 7);
        colours.assign(&mut second, 7);
        assert_eq!((slots(&first), slots(&second)), (vec![0, 1], vec![0, 1]));
        // Never two alike in one chart.
        let mut crowded = prepared(&["x", "y", "z", "inline"]);
        colours.assign(&mut crowded, 7);
        assert_eq!(slots(&crowded), [0, 1, 2, 3]);
        let mut wrap = prepared(&["a", "b", "c", "d", "e", "f", "g", "h"]);
        colours.assign(&mut wrap, 7);
        assert_eq!(slots(&wrap), [0, 1, 2, 3, 4, 5, 6, 0]);
    }

    #[test]
    fn a_mark_field_with_several_numbers_gives_one_mark_each() {
        let data = run(&[
            r#"{"type":"sample","data":{"series":"a","values":{"t":1,"y":2}}}"#,
            r#"{"type":"summary","data":{"series":"rounds","values":{"starts":"250.5 600 950","end":1200}}}"#,
        ]);
        let spec: ChartFile = toml::from_str(
            r#"
            [[chart]]
            name = "c"
            title = "t"
            kind = "points"
            x = "t"
            y = "y"
            [[chart.mark]]
            series = "rounds"
            field = "starts"
            label = "round"
            [[chart.mark]]
            series = "rounds"
            field = "end"
            label = "end"
            "#,
        )
        .expect("a valid spec");
        let prepared = spec.chart[0].prepare(&data).expect("prepares");
        let marks: Vec<(&str, f64)> = prepared
            .marks
            .iter()
            .map(|(label, at)| (label.as_str(), *at))
            .collect();
        assert_eq!(
            marks,
            vec![
                ("round 1", 250.5),
                ("round 2", 600.0),
                ("round 3", 950.0),
                ("end", 1200.0)
            ]
        );
    }

    #[test]
    fn a_segment_of_a_millisecond_on_a_long_axis_still_shows() {
        let data = run(&[
            r#"{"type":"sample","data":{"series":"quick","values":{"s":10,"e":10.001,"row":1}}}"#,
            r#"{"type":"sample","data":{"series":"long","values":{"s":0,"e":60000,"row":2}}}"#,
        ]);
        let spec: ChartFile = toml::from_str(
            r#"
            [[chart]]
            name = "c"
            title = "t"
            kind = "segments"
            x = "s"
            x_end = "e"
            y = "row"
            "#,
        )
        .expect("a valid spec");
        let prepared = spec.chart[0].prepare(&data).expect("prepares");
        let svg = draw::render(&spec.chart[0], &prepared, &THEMES[0], "caption").expect("draws");
        // Every segment is a polyline of two points; the shortest is wide
        // enough to see.
        let widths: Vec<i32> = svg
            .split("<polyline")
            .skip(1)
            .filter(|element| element.contains("stroke-width=\"3\""))
            .filter_map(|element| {
                let points = element.split("points=\"").nth(1)?.split('"').next()?;
                let xs: Vec<i32> = points
                    .split_whitespace()
                    .filter_map(|pair| pair.split(',').next()?.parse().ok())
                    .collect();
                Some(xs.last()? - xs.first()?)
            })
            .collect();
        assert_eq!(widths.len(), 2, "{svg}");
        assert!(widths.iter().all(|width| *width >= 4), "{widths:?}");
    }

    #[test]
    fn lanes_are_shared_across_series_and_ticks_are_named() {
        // Two kinds of request on row 3, overlapping in time, at the same
        // offset the lab gave them: lanes part them.
        let data = run(&[
            r#"{"type":"sample","data":{"series":"slow","values":{"s":0,"e":400,"row":2.8}}}"#,
            r#"{"type":"sample","data":{"series":"stream","values":{"s":1,"e":400,"row":2.8}}}"#,
        ]);
        let spec: ChartFile = toml::from_str(
            r#"
            [[chart]]
            name = "c"
            title = "t"
            kind = "segments"
            x = "s"
            x_end = "e"
            y = "row"
            lanes = true
            y_ticks = [[-1, "server out"], [3, "reset"]]
            clock = "simulated"
            "#,
        )
        .expect("a valid spec");
        let chart = &spec.chart[0];
        assert_eq!(chart.clock, Clock::Simulated);
        assert_eq!(chart.y_ticks[0], (-1.0, String::from("server out")));
        let prepared = chart.prepare(&data).expect("prepares");
        let (slow, stream) = (
            prepared.series[0].points[0].1,
            prepared.series[1].points[0].1,
        );
        assert!(slow != stream, "{slow} {stream}");
        assert!((slow - 3.0).abs() < 0.4 && (stream - 3.0).abs() < 0.4);

        let mut unordered = chart.clone();
        unordered.y_ticks.reverse();
        assert!(unordered.prepare(&data).is_err());
    }
}
