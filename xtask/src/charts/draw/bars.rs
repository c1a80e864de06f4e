//! Bar charts: one bar per series, its value written above it, the series
//! names on the x axis (without the family every bar shares, which the
//! title says, and wrapped at a `-` into lines that fit under the bar).

use anyhow::Result;
use plotters::{
    chart::ChartContext,
    coord::{
        Shift,
        cartesian::Cartesian2d,
        ranged1d::{SegmentValue, SegmentedCoord},
        types::{RangedCoordf64, RangedCoordusize},
    },
    prelude::*,
    style::text_anchor::{HPos, Pos, VPos},
};

use super::{Theme, label_style, plot_error, tick};
use crate::charts::{ChartSpec, Prepared, layout::legend_names};

/// The x axis labels' size, and roughly how wide one of its characters is.
const LABEL_PX: u32 = 13;
const CHAR_PX: f64 = 7.0;
const LINE_PX: i32 = 15;

/// The chart a bar chart draws into: a slot per name on x, values on y.
type BarChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<SegmentedCoord<RangedCoordusize>, RangedCoordf64>>;

pub(super) fn draw_bars(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    spec: &ChartSpec,
    data: &Prepared,
    theme: &Theme,
) -> Result<()> {
    if !data.groups.is_empty() {
        return draw_groups(area, spec, data, theme);
    }
    let full_names: Vec<String> = data
        .series
        .iter()
        .map(|series| series.name.clone())
        .collect();
    let values: Vec<f64> = data
        .series
        .iter()
        .map(|series| series.points[0].1)
        .collect();
    let (mut chart, _) = frame(area, spec, theme, &full_names, &values)?;
    let value_style = label_style(theme, 13).pos(Pos::new(HPos::Center, VPos::Bottom));
    for (index, value) in values.iter().enumerate() {
        let colour = theme.colour(data.series[index].colour);
        let mut bar = Rectangle::new(
            [
                (SegmentValue::Exact(index), 0.0),
                (SegmentValue::Exact(index + 1), *value),
            ],
            colour.filled(),
        );
        bar.set_margin(0, 0, 14, 14);
        chart
            .draw_series(std::iter::once(bar))
            .map_err(plot_error)?;
        chart
            .draw_series(std::iter::once(Text::new(
                // Three significant figures on every bar, as in the tables.
                lab_kit::Value::Num(*value).display(),
                (SegmentValue::CenterOf(index), *value),
                value_style.clone(),
            )))
            .map_err(plot_error)?;
    }
    Ok(())
}

/// The axes, the grid and the names under the slots (without the family
/// every name shares, which the title says, wrapped at a `-` into lines that
/// fit), for `values` on y; returns the chart and a slot's width in pixels.
fn frame<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    spec: &ChartSpec,
    theme: &Theme,
    full_names: &[String],
    values: &[f64],
) -> Result<(BarChart<'a, 'b>, f64)> {
    let names: Vec<String> = legend_names(full_names)
        .into_iter()
        .map(|name| name.trim_start_matches('/').to_string())
        .collect();
    let slot_px = f64::from(area.dim_in_pixel().0.saturating_sub(100)) / names.len().max(1) as f64;
    let max_chars = ((slot_px - 8.0) / CHAR_PX).floor().max(6.0) as usize;
    let labels: Vec<Vec<String>> = names
        .iter()
        .map(|name| wrap_label(name, max_chars))
        .collect();
    let lines = labels.iter().map(Vec::len).max().unwrap_or(1) as u32;
    let max = values.iter().copied().fold(0.0, f64::max);
    let top = if max > 0.0 { max * 1.15 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(&spec.title, label_style(theme, 18))
        .margin(12)
        .x_label_area_size(20 + LINE_PX as u32 * lines)
        .y_label_area_size(70)
        // A segmented range `0..n` has a segment for every value from 0 to n
        // inclusive; `0..n - 1` gives exactly one slot per bar.
        .build_cartesian_2d(
            (0..names.len().saturating_sub(1)).into_segmented(),
            0f64..top,
        )
        .map_err(plot_error)?;
    // The names are drawn below, a line at a time: plotters writes a label
    // on one line.
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(names.len())
        .x_label_formatter(&|_| String::new())
        .y_label_formatter(&|value| tick(*value))
        .y_desc(spec.y_label.clone().unwrap_or_else(|| spec.y.clone()))
        .axis_style(theme.text)
        .label_style(label_style(theme, 13))
        .axis_desc_style(label_style(theme, 13))
        .bold_line_style(theme.grid)
        .light_line_style(TRANSPARENT)
        .draw()
        .map_err(plot_error)?;
    let name_style = label_style(theme, LABEL_PX).pos(Pos::new(HPos::Center, VPos::Top));
    for (index, lines) in labels.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(SegmentValue::CenterOf(index), 0.0));
        for (line, text) in lines.iter().enumerate() {
            let at = (x, y + 8 + LINE_PX * line as i32);
            area.draw(&Text::new(text.clone(), at, name_style.clone()))
                .map_err(plot_error)?;
        }
    }
    Ok((chart, slot_px))
}

/// A comparison of machines: the groups (the lab's compared things) on the x
/// axis, a bar per machine in each, coloured by machine (the legend names
/// them), its value above it.
fn draw_groups(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    spec: &ChartSpec,
    data: &Prepared,
    theme: &Theme,
) -> Result<()> {
    let values: Vec<f64> = data
        .series
        .iter()
        .flat_map(|series| series.points.iter().map(|point| point.1))
        .collect();
    let (mut chart, slot_px) = frame(area, spec, theme, &data.groups, &values)?;
    // Each group's slot, less a gap on each side, shared by the machines.
    let gap = 8.0;
    let machines = data.series.len().max(1) as f64;
    let bar_px = ((slot_px - 2.0 * gap) / machines).max(2.0);
    let value_style = label_style(theme, 11).pos(Pos::new(HPos::Center, VPos::Bottom));
    for (machine, series) in data.series.iter().enumerate() {
        let colour = theme.colour(series.colour);
        for &(group, value, _) in &series.points {
            let group = group as usize;
            let left = gap + bar_px * machine as f64;
            let right = slot_px - left - bar_px;
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(group), 0.0),
                    (SegmentValue::Exact(group + 1), value),
                ],
                colour.filled(),
            );
            bar.set_margin(0, 0, left.round() as u32, right.max(0.0).round() as u32);
            chart
                .draw_series(std::iter::once(bar))
                .map_err(plot_error)?;
            let (slot_left, top_px) = chart.backend_coord(&(SegmentValue::Exact(group), value));
            let centre = slot_left + (left + bar_px / 2.0).round() as i32;
            area.draw(&Text::new(
                lab_kit::Value::Num(value).display(),
                (centre, top_px - 2),
                value_style.clone(),
            ))
            .map_err(plot_error)?;
        }
    }
    Ok(())
}

/// `name` in lines of at most `max_chars`, broken after a `-` (a word longer
/// than a line stays whole).
fn wrap_label(name: &str, max_chars: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in name.split_inclusive('-') {
        if !line.is_empty() && line.len() + word.len() > max_chars {
            lines.push(std::mem::take(&mut line));
        }
        line.push_str(word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::wrap_label;

    #[test]
    fn a_long_name_wraps_after_a_dash_and_a_short_one_stays_whole() {
        assert_eq!(
            wrap_label("failsafe-outside-retries", 12),
            ["failsafe-", "outside-", "retries"]
        );
        assert_eq!(wrap_label("own-inside-retries", 20), ["own-inside-retries"]);
        assert_eq!(
            wrap_label("client-per-provider", 11),
            ["client-per-", "provider"]
        );
        assert_eq!(wrap_label("unbreakable", 4), ["unbreakable"]);
        assert_eq!(wrap_label("", 4), [""]);
    }
}
