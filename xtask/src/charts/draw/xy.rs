//! Line, points and segments charts on x/y axes (linear or log): ticks the
//! chart chooses itself where plotters' would read badly, the identity line,
//! mark lines with their labels staggered in a band above the plot, and the
//! series.

use anyhow::Result;
use plotters::{
    coord::{
        Shift,
        ranged1d::{AsRangedCoord, Ranged, ValueFormatter},
    },
    prelude::*,
    style::text_anchor::{HPos, Pos, VPos},
};

use super::{
    MARGIN, MARK_FONT, MARK_ROW, MIN_SEGMENT_PX, TICK_FONT, TITLE_HEIGHT, Theme, WIDTH,
    X_LABEL_AREA, Y_LABEL_AREA, label_style, padded, plot_error, tick,
};
use crate::charts::{ChartSpec, Kind, Prepared, layout};

/// A mark's label, placed: right of its line, or left of it where it would
/// leave the plot, on the first row of the band above the plot where it
/// runs into no other label.
struct MarkLabel {
    text: String,
    at: f64,
    right_aligned: bool,
    row: usize,
}

fn mark_labels(
    data: &Prepared,
    (x_low, x_high): (f64, f64),
    log_x: bool,
    (plot_left, plot_right): (f64, f64),
) -> Vec<MarkLabel> {
    let fraction = |value: f64| {
        if log_x {
            (value.ln() - x_low.ln()) / (x_high.ln() - x_low.ln())
        } else {
            (value - x_low) / (x_high - x_low)
        }
    };
    let mut labels = Vec::new();
    let mut spans = Vec::new();
    for (text, at) in &data.marks {
        let pixel = plot_left + fraction(*at) * (plot_right - plot_left);
        let width = layout::text_width(text, f64::from(MARK_FONT)) + 3.0;
        let right_aligned = pixel + width > plot_right;
        spans.push(if right_aligned {
            (pixel - width, pixel)
        } else {
            (pixel, pixel + width)
        });
        labels.push(MarkLabel {
            text: text.clone(),
            at: *at,
            right_aligned,
            row: 0,
        });
    }
    for (label, row) in labels.iter_mut().zip(layout::stagger(&spans, 6.0)) {
        label.row = row;
    }
    labels
}

/// Tick values and names for an axis whose ticks the chart chooses itself
/// rather than plotters: named ticks, 1-3-10 on log axes, whole numbers for
/// whole-number data.
fn chosen_ticks(
    spec: &ChartSpec,
    data: &Prepared,
    x_axis: bool,
    range: (f64, f64),
) -> Option<Vec<(f64, String)>> {
    let named = |values: Vec<f64>| {
        values
            .into_iter()
            .map(|value| (value, tick(value)))
            .collect::<Vec<_>>()
    };
    let ticks = if x_axis {
        if spec.log_x {
            named(layout::log_ticks(range.0, range.1))
        } else {
            let values: Vec<f64> = data
                .series
                .iter()
                .flat_map(|one| one.points.iter().flat_map(|&(x, _, x_end)| [x, x_end]))
                .collect();
            named(layout::integer_ticks(&values, range.0, range.1)?)
        }
    } else if !spec.y_ticks.is_empty() {
        spec.y_ticks.clone()
    } else if spec.log_y {
        named(layout::log_ticks(range.0, range.1))
    } else {
        return None;
    };
    (!ticks.is_empty()).then_some(ticks)
}

pub(super) fn draw_xy<X, Y>(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    spec: &ChartSpec,
    data: &Prepared,
    theme: &Theme,
    x_range: X,
    y_range: Y,
) -> Result<()>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let x_bounds = padded(spec, data, true, spec.log_x);
    let y_bounds = padded(spec, data, false, spec.log_y);
    let x_ticks = chosen_ticks(spec, data, true, x_bounds);
    let y_ticks = chosen_ticks(spec, data, false, y_bounds);
    let widest_y_tick = y_ticks
        .iter()
        .flatten()
        .map(|(_, name)| layout::text_width(name, f64::from(TICK_FONT)))
        .fold(0.0, f64::max);
    // Room for the tick names, the gap to the axis, and the axis name.
    let y_label_area = Y_LABEL_AREA.max((widest_y_tick + 36.0).ceil() as u32);
    let plot_x = (f64::from(MARGIN + y_label_area), f64::from(WIDTH - MARGIN));
    let labels = mark_labels(data, x_bounds, spec.log_x, plot_x);
    let label_rows = labels.iter().map(|label| label.row + 1).max().unwrap_or(0) as u32;
    let mark_band = if label_rows == 0 {
        0
    } else {
        label_rows * MARK_ROW + 4
    };

    // The title is drawn here rather than by plotters so the band for the
    // mark labels can sit between it and the plot.
    let title_style = label_style(theme, 18).pos(Pos::new(HPos::Center, VPos::Top));
    area.draw_text(
        &spec.title,
        &title_style,
        ((WIDTH / 2) as i32, MARGIN as i32),
    )
    .map_err(plot_error)?;
    let mut chart = ChartBuilder::on(area)
        .margin(MARGIN)
        .margin_top(MARGIN + TITLE_HEIGHT + mark_band)
        .x_label_area_size(X_LABEL_AREA)
        .y_label_area_size(y_label_area)
        .build_cartesian_2d(x_range, y_range)
        .map_err(plot_error)?;
    // Where the chart chooses the ticks, plotters draws neither its own
    // labels nor its own grid lines on that axis (a log axis would still
    // draw some of its key points otherwise).
    let (own_x, own_y) = (x_ticks.is_some(), y_ticks.is_some());
    let x_formatter = |value: &f64| if own_x { String::new() } else { tick(*value) };
    let y_formatter = |value: &f64| if own_y { String::new() } else { tick(*value) };
    let mut mesh = chart.configure_mesh();
    mesh.x_label_formatter(&x_formatter)
        .y_label_formatter(&y_formatter)
        .x_desc(
            spec.x_label
                .clone()
                .or_else(|| spec.x.clone())
                .unwrap_or_default(),
        )
        .y_desc(spec.y_label.clone().unwrap_or_else(|| spec.y.clone()))
        .axis_style(theme.text)
        .label_style(label_style(theme, TICK_FONT))
        .axis_desc_style(label_style(theme, TICK_FONT))
        .bold_line_style(theme.grid)
        .light_line_style(TRANSPARENT);
    if own_x {
        mesh.x_labels(0).disable_x_mesh();
    }
    if own_y {
        mesh.y_labels(0).disable_y_mesh();
    }
    mesh.draw().map_err(plot_error)?;

    let (x_low, x_high) = {
        let range = chart.x_range();
        (range.start, range.end)
    };
    let (y_low, y_high) = {
        let range = chart.y_range();
        (range.start, range.end)
    };
    let (pixel_x, pixel_y) = chart.plotting_area().get_pixel_range();
    let tick_colour = theme.text;
    if let Some(ticks) = &x_ticks {
        let style = label_style(theme, TICK_FONT).pos(Pos::new(HPos::Center, VPos::Top));
        for (value, name) in ticks {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(*value, y_low), (*value, y_high)],
                    theme.grid,
                )))
                .map_err(plot_error)?;
            let (pixel, _) = chart.backend_coord(&(*value, y_low));
            area.draw(&PathElement::new(
                vec![(pixel, pixel_y.end), (pixel, pixel_y.end + 5)],
                tick_colour,
            ))
            .map_err(plot_error)?;
            area.draw_text(name, &style, (pixel, pixel_y.end + 8))
                .map_err(plot_error)?;
        }
    }
    if let Some(ticks) = &y_ticks {
        let style = label_style(theme, TICK_FONT).pos(Pos::new(HPos::Right, VPos::Center));
        for (value, name) in ticks {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x_low, *value), (x_high, *value)],
                    theme.grid,
                )))
                .map_err(plot_error)?;
            let (_, pixel) = chart.backend_coord(&(x_low, *value));
            area.draw(&PathElement::new(
                vec![(pixel_x.start - 5, pixel), (pixel_x.start, pixel)],
                tick_colour,
            ))
            .map_err(plot_error)?;
            area.draw_text(name, &style, (pixel_x.start - 8, pixel))
                .map_err(plot_error)?;
        }
    }

    if let Some(label) = &spec.identity_line {
        let (from, to) = (x_low.max(y_low), x_high.min(y_high));
        if from < to {
            let style = theme.text.mix(0.45).stroke_width(1);
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(from, from), (to, to)],
                    style,
                )))
                .map_err(plot_error)?;
            // In the bottom-right corner, named as "the diagonal": the end of
            // the line is where the data crowd too, and the lab charts that
            // draw it have their data at or above it, so the corner is free.
            let text_style = label_style(theme, 12).pos(Pos::new(HPos::Right, VPos::Bottom));
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("diagonal: {label} "),
                    (x_high, y_low),
                    text_style,
                )))
                .map_err(plot_error)?;
        }
    }
    let band_top = pixel_y.start - mark_band as i32;
    for label in &labels {
        let mark_style = theme.text.mix(0.6).stroke_width(1);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(label.at, y_low), (label.at, y_high)],
                mark_style,
            )))
            .map_err(plot_error)?;
        // The line goes on up into the band, to the row of its label.
        let (pixel, _) = chart.backend_coord(&(label.at, y_high));
        let text_top = band_top + (label.row as u32 * MARK_ROW) as i32 + 2;
        area.draw(&PathElement::new(
            vec![(pixel, text_top), (pixel, pixel_y.start)],
            mark_style,
        ))
        .map_err(plot_error)?;
        let (anchor, at) = if label.right_aligned {
            (HPos::Right, pixel - 3)
        } else {
            (HPos::Left, pixel + 3)
        };
        let text_style = label_style(theme, MARK_FONT).pos(Pos::new(anchor, VPos::Top));
        area.draw_text(&label.text, &text_style, (at, text_top))
            .map_err(plot_error)?;
    }

    for series in &data.series {
        let colour = theme.colour(series.colour);
        match spec.kind {
            Kind::Line => {
                chart
                    .draw_series(
                        series
                            .points
                            .iter()
                            .map(|&(x, y, _)| Circle::new((x, y), 3, colour.filled())),
                    )
                    .map_err(plot_error)?;
                chart
                    .draw_series(LineSeries::new(
                        series.points.iter().map(|&(x, y, _)| (x, y)),
                        colour.stroke_width(2),
                    ))
                    .map_err(plot_error)?;
            }
            Kind::Points => {
                chart
                    .draw_series(
                        series
                            .points
                            .iter()
                            .map(|&(x, y, _)| Circle::new((x, y), 4, colour.filled())),
                    )
                    .map_err(plot_error)?;
            }
            Kind::Segments => {
                // Drawn in pixels, at least MIN_SEGMENT_PX long, so a request
                // that took a millisecond on a minute-long axis still shows.
                for &(x, y, x_end) in &series.points {
                    let (start, row) = chart.backend_coord(&(x, y));
                    let (end, _) = chart.backend_coord(&(x_end, y));
                    let end = end.max(start + MIN_SEGMENT_PX);
                    area.draw(&PathElement::new(
                        vec![(start, row), (end, row)],
                        colour.stroke_width(3),
                    ))
                    .map_err(plot_error)?;
                }
            }
            Kind::Bar => unreachable!("bars are drawn by draw_bars"),
        }
        if spec.point_labels && spec.kind != Kind::Segments {
            let style = label_style(theme, 12).pos(Pos::new(HPos::Center, VPos::Bottom));
            for &(x, y, _) in &series.points {
                let (pixel_x, pixel_y) = chart.backend_coord(&(x, y));
                area.draw_text(&tick(y), &style, (pixel_x, pixel_y - 6))
                    .map_err(plot_error)?;
            }
        }
    }
    Ok(())
}
