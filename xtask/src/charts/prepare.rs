//! A chart's data pulled out of a run and checked against its spec: the
//! series in order, their points, lanes for overlapping segments, and the
//! marks' values.

use anyhow::{Context, Result, bail, ensure};
use lab_kit::record::Point;

use super::{ChartSpec, Kind, layout, spec::MarkSpec};
use crate::data::{PointKind, RunData};

/// A chart's data, pulled out of a run and checked.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub series: Vec<PreparedSeries>,
    pub marks: Vec<(String, f64)>,
    /// A comparison of machines (see `compare`): the bar chart's groups, one
    /// per compared thing; each series is then a machine with a bar in
    /// every group. Empty for a lab's own charts.
    pub groups: Vec<String>,
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
        self.check_axes()?;
        let points = run.points(kind);
        let names = self.series_names(points);
        ensure!(!names.is_empty(), "the run has no {kind:?} records to draw");
        let mut series = Vec::new();
        for (index, name) in names.iter().enumerate() {
            series.push(self.one_series(index, name, points, kind)?);
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
            mark_values(mark, run, &mut marks)?;
        }
        Ok(Prepared {
            series,
            marks,
            groups: Vec::new(),
        })
    }

    /// The fields the chart's kind needs, and no log scale on a bar chart.
    fn check_axes(&self) -> Result<()> {
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
        Ok(())
    }

    /// The series the spec names, or else every series of the records, in
    /// the order they first appear.
    fn series_names(&self, points: &[Point]) -> Vec<String> {
        if !self.series.is_empty() {
            return self.series.clone();
        }
        let mut names: Vec<String> = Vec::new();
        for point in points {
            if !names.contains(&point.series) {
                names.push(point.series.clone());
            }
        }
        names
    }

    /// The points of series `name`, the `index`th of the chart, sorted by x.
    fn one_series(
        &self,
        index: usize,
        name: &str,
        points: &[Point],
        kind: PointKind,
    ) -> Result<PreparedSeries> {
        let mut prepared = PreparedSeries {
            name: name.to_string(),
            points: Vec::new(),
            colour: index,
        };
        for point in points.iter().filter(|point| point.series == name) {
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
        Ok(prepared)
    }
}

/// A mark's value, from its series' summary: one mark, or one per value
/// (numbered from 1) where the field is a list.
fn mark_values(mark: &MarkSpec, run: &RunData, marks: &mut Vec<(String, f64)>) -> Result<()> {
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
    Ok(())
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
