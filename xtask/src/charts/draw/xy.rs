//! Line, points and segments charts on x/y axes (linear or log): ticks the
//! chart chooses itself where plotters' would read badly, the identity line,
//! mark lines with their labels staggered in a band above the plot, and the
//! series.

use std::ops::Range;

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
use crate::charts::{ChartSpec, Kind, Prepared, PreparedSeries, layout};

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

/// Where the plot sits in the picture: the ticks the chart chooses itself,
/// the room its y tick names need, the mark labels and the band above the
/// plot that holds them.
struct Frame {
    x_ticks: Option<Vec<(f64, String)>>,
    y_ticks: Option<Vec<(f64, String)>>,
    y_label_area: u32,
    labels: Vec<MarkLabel>,
    mark_band: u32,
}

impl Frame {
    fn new(spec: &ChartSpec, data: &Prepared) -> Frame {
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
        Frame {
            x_ticks,
            y_ticks,
            y_label_area,
            labels,
            mark_band,
        }
    }
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
    let frame = Frame::new(spec, data);
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
        .margin_top(MARGIN + TITLE_HEIGHT + frame.mark_band)
        .x_label_area_size(X_LABEL_AREA)
        .y_label_area_size(frame.y_label_area)
        .build_cartesian_2d(x_range, y_range)
        .map_err(plot_error)?;
    draw_mesh(&mut chart, spec, theme, &frame)?;
    let mut plot = Plot::new(area, chart, theme);
    if let Some(ticks) = &frame.x_ticks {
        plot.draw_x_ticks(ticks)?;
    }
    if let Some(ticks) = &frame.y_ticks {
        plot.draw_y_ticks(ticks)?;
    }
    if let Some(label) = &spec.identity_line {
        plot.draw_identity_line(label)?;
    }
    plot.draw_marks(&frame)?;
    for series in &data.series {
        plot.draw_series(spec, series)?;
    }
    Ok(())
}

/// The axes, their names, and plotters' own ticks and grid where the chart
/// does not choose them.
fn draw_mesh<XC, YC>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<XC, YC>>,
    spec: &ChartSpec,
    theme: &Theme,
    frame: &Frame,
) -> Result<()>
where
    XC: Ranged<ValueType = f64> + ValueFormatter<f64>,
    YC: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    // Where the chart chooses the ticks, plotters draws neither its own
    // labels nor its own grid lines on that axis (a log axis would still
    // draw some of its key points otherwise).
    let (own_x, own_y) = (frame.x_ticks.is_some(), frame.y_ticks.is_some());
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
    mesh.draw().map_err(plot_error)
}

/// The chart once its mesh is drawn, with what the layers drawn over it
/// need: the ranges of its axes in values and in pixels.
struct Plot<'a, 'b, XC: Ranged<ValueType = f64>, YC: Ranged<ValueType = f64>> {
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    chart: ChartContext<'a, SVGBackend<'b>, Cartesian2d<XC, YC>>,
    theme: &'a Theme,
    x: (f64, f64),
    y: (f64, f64),
    pixel_x: Range<i32>,
    pixel_y: Range<i32>,
}

impl<'a, 'b, XC, YC> Plot<'a, 'b, XC, YC>
where
    XC: Ranged<ValueType = f64>,
    YC: Ranged<ValueType = f64>,
{
    fn new(
        area: &'a DrawingArea<SVGBackend<'b>, Shift>,
        chart: ChartContext<'a, SVGBackend<'b>, Cartesian2d<XC, YC>>,
        theme: &'a Theme,
    ) -> Self {
        let x = {
            let range = chart.x_range();
            (range.start, range.end)
        };
        let y = {
            let range = chart.y_range();
            (range.start, range.end)
        };
        let (pixel_x, pixel_y) = chart.plotting_area().get_pixel_range();
        Plot {
            area,
            chart,
            theme,
            x,
            y,
            pixel_x,
            pixel_y,
        }
    }

    /// A line in chart coordinates.
    fn line(&mut self, points: Vec<(f64, f64)>, style: impl Into<ShapeStyle>) -> Result<()> {
        self.chart
            .draw_series(std::iter::once(PathElement::new(points, style)))
            .map_err(plot_error)?;
        Ok(())
    }

    /// A line in pixels, free to leave the plot.
    fn pixel_line(&self, points: Vec<(i32, i32)>, style: impl Into<ShapeStyle>) -> Result<()> {
        self.area
            .draw(&PathElement::new(points, style))
            .map_err(plot_error)
    }

    fn draw_x_ticks(&mut self, ticks: &[(f64, String)]) -> Result<()> {
        let style = label_style(self.theme, TICK_FONT).pos(Pos::new(HPos::Center, VPos::Top));
        let (y_low, y_high) = self.y;
        let bottom = self.pixel_y.end;
        for (value, name) in ticks {
            self.line(vec![(*value, y_low), (*value, y_high)], self.theme.grid)?;
            let (pixel, _) = self.chart.backend_coord(&(*value, y_low));
            self.pixel_line(vec![(pixel, bottom), (pixel, bottom + 5)], self.theme.text)?;
            self.area
                .draw_text(name, &style, (pixel, bottom + 8))
                .map_err(plot_error)?;
        }
        Ok(())
    }

    fn draw_y_ticks(&mut self, ticks: &[(f64, String)]) -> Result<()> {
        let style = label_style(self.theme, TICK_FONT).pos(Pos::new(HPos::Right, VPos::Center));
        let (x_low, x_high) = self.x;
        let left = self.pixel_x.start;
        for (value, name) in ticks {
            self.line(vec![(x_low, *value), (x_high, *value)], self.theme.grid)?;
            let (_, pixel) = self.chart.backend_coord(&(x_low, *value));
            self.pixel_line(vec![(left - 5, pixel), (left, pixel)], self.theme.text)?;
            self.area
                .draw_text(name, &style, (left - 8, pixel))
                .map_err(plot_error)?;
        }
        Ok(())
    }

    fn draw_identity_line(&mut self, label: &str) -> Result<()> {
        let ((x_low, x_high), (y_low, y_high)) = (self.x, self.y);
        let (from, to) = (x_low.max(y_low), x_high.min(y_high));
        if from < to {
            let style = self.theme.text.mix(0.45).stroke_width(1);
            self.line(vec![(from, from), (to, to)], style)?;
            // In the bottom-right corner, named as "the diagonal": the end of
            // the line is where the data crowd too, and the lab charts that
            // draw it have their data at or above it, so the corner is free.
            let text_style = label_style(self.theme, 12).pos(Pos::new(HPos::Right, VPos::Bottom));
            self.chart
                .draw_series(std::iter::once(Text::new(
                    format!("diagonal: {label} "),
                    (x_high, y_low),
                    text_style,
                )))
                .map_err(plot_error)?;
        }
        Ok(())
    }

    fn draw_marks(&mut self, frame: &Frame) -> Result<()> {
        let (y_low, y_high) = self.y;
        let plot_top = self.pixel_y.start;
        let band_top = plot_top - frame.mark_band as i32;
        for label in &frame.labels {
            let mark_style = self.theme.text.mix(0.6).stroke_width(1);
            self.line(vec![(label.at, y_low), (label.at, y_high)], mark_style)?;
            // The line goes on up into the band, to the row of its label.
            let (pixel, _) = self.chart.backend_coord(&(label.at, y_high));
            let text_top = band_top + (label.row as u32 * MARK_ROW) as i32 + 2;
            self.pixel_line(vec![(pixel, text_top), (pixel, plot_top)], mark_style)?;
            let (anchor, at) = if label.right_aligned {
                (HPos::Right, pixel - 3)
            } else {
                (HPos::Left, pixel + 3)
            };
            let text_style = label_style(self.theme, MARK_FONT).pos(Pos::new(anchor, VPos::Top));
            self.area
                .draw_text(&label.text, &text_style, (at, text_top))
                .map_err(plot_error)?;
        }
        Ok(())
    }

    /// One series, in the chart's kind, with its values over the points
    /// where the spec asks for them.
    fn draw_series(&mut self, spec: &ChartSpec, series: &PreparedSeries) -> Result<()> {
        let colour = self.theme.colour(series.colour);
        let dots = |radius: u32| {
            series
                .points
                .iter()
                .map(move |&(x, y, _)| Circle::new((x, y), radius, colour.filled()))
        };
        match spec.kind {
            Kind::Line => {
                self.chart.draw_series(dots(3)).map_err(plot_error)?;
                self.chart
                    .draw_series(LineSeries::new(
                        series.points.iter().map(|&(x, y, _)| (x, y)),
                        colour.stroke_width(2),
                    ))
                    .map_err(plot_error)?;
            }
            Kind::Points => {
                self.chart.draw_series(dots(4)).map_err(plot_error)?;
            }
            Kind::Segments => {
                // Drawn in pixels, at least MIN_SEGMENT_PX long, so a request
                // that took a millisecond on a minute-long axis still shows.
                for &(x, y, x_end) in &series.points {
                    let (start, row) = self.chart.backend_coord(&(x, y));
                    let (end, _) = self.chart.backend_coord(&(x_end, y));
                    let end = end.max(start + MIN_SEGMENT_PX);
                    self.pixel_line(vec![(start, row), (end, row)], colour.stroke_width(3))?;
                }
            }
            Kind::Bar => unreachable!("bars are drawn by draw_bars"),
        }
        if spec.point_labels && spec.kind != Kind::Segments {
            let style = label_style(self.theme, 12).pos(Pos::new(HPos::Center, VPos::Bottom));
            for &(x, y, _) in &series.points {
                let (pixel_x, pixel_y) = self.chart.backend_coord(&(x, y));
                self.area
                    .draw_text(&tick(y), &style, (pixel_x, pixel_y - 6))
                    .map_err(plot_error)?;
            }
        }
        Ok(())
    }
}
