//! Bar charts: one bar per series, its value written above it, the series
//! names on the x axis.

use anyhow::Result;
use plotters::{
    coord::{Shift, ranged1d::SegmentValue},
    prelude::*,
    style::text_anchor::{HPos, Pos, VPos},
};

use super::{Theme, label_style, plot_error, tick};
use crate::charts::{ChartSpec, Prepared};

pub(super) fn draw_bars(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    spec: &ChartSpec,
    data: &Prepared,
    theme: &Theme,
) -> Result<()> {
    let names: Vec<String> = data
        .series
        .iter()
        .map(|series| series.name.clone())
        .collect();
    let values: Vec<f64> = data
        .series
        .iter()
        .map(|series| series.points[0].1)
        .collect();
    let max = values.iter().copied().fold(0.0, f64::max);
    let top = if max > 0.0 { max * 1.15 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(&spec.title, label_style(theme, 18))
        .margin(12)
        .x_label_area_size(34)
        .y_label_area_size(70)
        // A segmented range `0..n` has a segment for every value from 0 to n
        // inclusive; `0..n - 1` gives exactly one slot per bar.
        .build_cartesian_2d(
            (0..names.len().saturating_sub(1)).into_segmented(),
            0f64..top,
        )
        .map_err(plot_error)?;
    let formatter = |value: &SegmentValue<usize>| match value {
        SegmentValue::CenterOf(index) => names.get(*index).cloned().unwrap_or_default(),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(names.len())
        .x_label_formatter(&formatter)
        .y_label_formatter(&|value| tick(*value))
        .y_desc(spec.y_label.clone().unwrap_or_else(|| spec.y.clone()))
        .axis_style(theme.text)
        .label_style(label_style(theme, 13))
        .axis_desc_style(label_style(theme, 13))
        .bold_line_style(theme.grid)
        .light_line_style(TRANSPARENT)
        .draw()
        .map_err(plot_error)?;
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
