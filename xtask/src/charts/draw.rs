//! Drawing with plotters into SVG text. Backgrounds stay transparent so the
//! page shows through; text, axes and the palette change with the theme.

use anyhow::{Result, anyhow};
use plotters::{
    coord::{
        Shift,
        ranged1d::{AsRangedCoord, Ranged, SegmentValue, ValueFormatter},
    },
    prelude::*,
    style::text_anchor::{HPos, Pos, VPos},
};

use super::{ChartSpec, Kind, Legend, Prepared, layout};

/// The shortest a segment is drawn, in pixels.
const MIN_SEGMENT_PX: i32 = 4;

/// How many series colours a theme has.
pub const PALETTE_SIZE: usize = 7;

/// One colour scheme for one of mdBook's theme families.
#[derive(Debug, Clone, Copy)]
pub struct Theme {
    pub name: &'static str,
    text: RGBColor,
    grid: RGBAColor,
    palette: [RGBColor; PALETTE_SIZE],
}

/// Light (mdBook's light and rust themes, and print) and dark (coal, navy, ayu).
/// The palettes are Okabe and Ito's colour-blind-safe colours, ordered per
/// background so the first series always has strong contrast.
pub const THEMES: [Theme; 2] = [
    Theme {
        name: "light",
        text: RGBColor(0x26, 0x26, 0x26),
        grid: RGBAColor(0, 0, 0, 0.12),
        palette: [
            RGBColor(0x00, 0x72, 0xB2),
            RGBColor(0xD5, 0x5E, 0x00),
            RGBColor(0x00, 0x9E, 0x73),
            RGBColor(0xCC, 0x79, 0xA7),
            RGBColor(0xE6, 0x9F, 0x00),
            RGBColor(0x56, 0xB4, 0xE9),
            RGBColor(0x40, 0x40, 0x40),
        ],
    },
    Theme {
        name: "dark",
        text: RGBColor(0xDD, 0xDD, 0xDD),
        grid: RGBAColor(255, 255, 255, 0.14),
        palette: [
            RGBColor(0x56, 0xB4, 0xE9),
            RGBColor(0xE6, 0x9F, 0x00),
            RGBColor(0x00, 0xC0, 0x8C),
            RGBColor(0xE0, 0x8F, 0xBF),
            RGBColor(0xF0, 0xE4, 0x42),
            RGBColor(0xFF, 0x7F, 0x2A),
            RGBColor(0xC8, 0xC8, 0xC8),
        ],
    },
];

const WIDTH: u32 = 760;
const HEIGHT: u32 = 430;
const CAPTION_HEIGHT: u32 = 24;
const FONT: &str = "sans-serif";
/// The chart's margin on every side, and the room for the y axis's ticks and name.
const MARGIN: u32 = 12;
const Y_LABEL_AREA: u32 = 70;
const X_LABEL_AREA: u32 = 44;
const TICK_FONT: u32 = 13;
const LEGEND_FONT: u32 = 13;
const LEGEND_ROW: u32 = 18;
const MARK_FONT: u32 = 12;
const MARK_ROW: u32 = 15;
const TITLE_HEIGHT: u32 = 28;

fn plot_error(error: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("plotters: {error}")
}

/// The SVG text of one chart in one theme, with the run's caption at the bottom.
pub fn render(spec: &ChartSpec, data: &Prepared, theme: &Theme, caption: &str) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let (plot, footer) = root.split_vertically(HEIGHT - CAPTION_HEIGHT);
        let caption_style = (FONT, 12).into_font().color(&theme.text.mix(0.75));
        footer
            .draw_text(caption, &caption_style, (12, 4))
            .map_err(plot_error)?;
        let legend = legend_entries(spec, data);
        let legend_rows = legend_rows(&legend);
        let plot = if legend_rows.is_empty() {
            plot
        } else {
            let height = plot.dim_in_pixel().1;
            let band = legend_rows.len() as u32 * LEGEND_ROW + 4;
            let (plot, legend_area) = plot.split_vertically(height - band);
            draw_legend(&legend_area, &legend_rows, theme)?;
            plot
        };
        match spec.kind {
            Kind::Bar => draw_bars(&plot, spec, data, theme)?,
            Kind::Line | Kind::Points | Kind::Segments => {
                let (x_min, x_max) = padded(spec, data, true, spec.log_x);
                let (y_min, y_max) = padded(spec, data, false, spec.log_y);
                match (spec.log_x, spec.log_y) {
                    (false, false) => {
                        draw_xy(&plot, spec, data, theme, x_min..x_max, y_min..y_max)?
                    }
                    (true, false) => draw_xy(
                        &plot,
                        spec,
                        data,
                        theme,
                        (x_min..x_max).log_scale(),
                        y_min..y_max,
                    )?,
                    (false, true) => draw_xy(
                        &plot,
                        spec,
                        data,
                        theme,
                        x_min..x_max,
                        (y_min..y_max).log_scale(),
                    )?,
                    (true, true) => draw_xy(
                        &plot,
                        spec,
                        data,
                        theme,
                        (x_min..x_max).log_scale(),
                        (y_min..y_max).log_scale(),
                    )?,
                }
            }
        }
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

/// The data's range on one axis with a little room, from 0 on linear y axes;
/// with named y ticks, half a row beyond the first and the last tick.
fn padded(spec: &ChartSpec, data: &Prepared, x_axis: bool, log: bool) -> (f64, f64) {
    let mut values: Vec<f64> = Vec::new();
    for series in &data.series {
        for &(x, y, x_end) in &series.points {
            if x_axis {
                values.extend([x, x_end]);
            } else {
                values.push(y);
            }
        }
    }
    if x_axis {
        values.extend(data.marks.iter().map(|(_, at)| *at));
    }
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if let (false, Some(first), Some(last)) = (x_axis, spec.y_ticks.first(), spec.y_ticks.last()) {
        return (min.min(first.0) - 0.5, max.max(last.0) + 0.5);
    }
    if log {
        return (min / 1.3, max * 1.3);
    }
    let low = if x_axis { min } else { min.min(0.0) };
    let span = (max - low).max(f64::EPSILON.max(max.abs() * 0.1)).max(1e-9);
    let high = max + span * if x_axis { 0.04 } else { 0.12 };
    let low = if x_axis && low != 0.0 {
        low - span * 0.04
    } else {
        low
    };
    (low, high)
}

/// Tick labels without trailing noise: 1200 → "1200", 0.25 → "0.25".
fn tick(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1000.0 || value.fract().abs() < 1e-9 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else {
        let text = format!("{value:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn label_style(theme: &Theme, size: u32) -> TextStyle<'static> {
    (FONT, size).into_font().color(&theme.text)
}

fn draw_bars(
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
        let colour = theme.palette[data.series[index].colour % PALETTE_SIZE];
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

/// The series names a legend shows, with their palette index; none for bar
/// charts (the names are on the x axis) or for a single series.
fn legend_entries(spec: &ChartSpec, data: &Prepared) -> Vec<(String, usize)> {
    if spec.kind == Kind::Bar || spec.legend == Legend::None || data.series.len() < 2 {
        return Vec::new();
    }
    let names: Vec<String> = data.series.iter().map(|one| one.name.clone()).collect();
    layout::legend_names(&names)
        .into_iter()
        .zip(&data.series)
        .map(|(name, series)| (name, series.colour))
        .collect()
}

/// The legend entries wrapped into rows that fit under the plot.
fn legend_rows(entries: &[(String, usize)]) -> Vec<Vec<(String, usize)>> {
    let (left, right) = (f64::from(MARGIN + Y_LABEL_AREA), f64::from(WIDTH - MARGIN));
    let mut rows: Vec<Vec<(String, usize)>> = Vec::new();
    let mut cursor = left;
    for (name, index) in entries {
        let width = legend_entry_width(name);
        if rows.is_empty() || (cursor + width > right && cursor > left) {
            rows.push(Vec::new());
            cursor = left;
        }
        rows.last_mut()
            .expect("a row was just pushed")
            .push((name.clone(), *index));
        cursor += width;
    }
    rows
}

fn legend_entry_width(name: &str) -> f64 {
    14.0 + 6.0 + layout::text_width(name, f64::from(LEGEND_FONT)) + 18.0
}

/// The legend, in its own band below the plot: a swatch and a name per series.
fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    rows: &[Vec<(String, usize)>],
    theme: &Theme,
) -> Result<()> {
    let style = label_style(theme, LEGEND_FONT).pos(Pos::new(HPos::Left, VPos::Center));
    for (row_index, row) in rows.iter().enumerate() {
        let middle = (row_index as u32 * LEGEND_ROW + LEGEND_ROW / 2) as i32;
        let mut cursor = f64::from(MARGIN + Y_LABEL_AREA);
        for (name, index) in row {
            let colour = theme.palette[index % PALETTE_SIZE];
            let left = cursor as i32;
            area.draw(&Rectangle::new(
                [(left, middle - 5), (left + 14, middle + 5)],
                colour.filled(),
            ))
            .map_err(plot_error)?;
            area.draw_text(name, &style, (left + 20, middle))
                .map_err(plot_error)?;
            cursor += legend_entry_width(name);
        }
    }
    Ok(())
}

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

fn draw_xy<X, Y>(
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
        let colour = theme.palette[series.colour % PALETTE_SIZE];
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_read_well() {
        assert_eq!(tick(1200.0), "1200");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(12.345), "12.3");
        assert_eq!(tick(5.0), "5");
    }
}
