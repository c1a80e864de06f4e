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

use super::{ChartSpec, Kind, Legend, Prepared};

/// One colour scheme for one of mdBook's theme families.
#[derive(Debug, Clone, Copy)]
pub struct Theme {
    pub name: &'static str,
    text: RGBColor,
    grid: RGBAColor,
    legend_background: RGBAColor,
    palette: [RGBColor; 7],
}

/// Light (mdBook's light and rust themes, and print) and dark (coal, navy, ayu).
/// The palettes are Okabe and Ito's colour-blind-safe colours, ordered per
/// background so the first series always has strong contrast.
pub const THEMES: [Theme; 2] = [
    Theme {
        name: "light",
        text: RGBColor(0x26, 0x26, 0x26),
        grid: RGBAColor(0, 0, 0, 0.12),
        legend_background: RGBAColor(255, 255, 255, 0.85),
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
        legend_background: RGBAColor(0x20, 0x20, 0x28, 0.85),
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
        match spec.kind {
            Kind::Bar => draw_bars(&plot, spec, data, theme)?,
            Kind::Line | Kind::Points | Kind::Segments => {
                let (x_min, x_max) = padded(data, true, spec.log_x);
                let (y_min, y_max) = padded(data, false, spec.log_y);
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

/// The data's range on one axis with a little room, from 0 on linear y axes.
fn padded(data: &Prepared, x_axis: bool, log: bool) -> (f64, f64) {
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
        .build_cartesian_2d((0..names.len()).into_segmented(), 0f64..top)
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
        let colour = theme.palette[index % theme.palette.len()];
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
                tick(*value),
                (SegmentValue::CenterOf(index), *value),
                value_style.clone(),
            )))
            .map_err(plot_error)?;
    }
    Ok(())
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
    let mut chart = ChartBuilder::on(area)
        .caption(&spec.title, label_style(theme, 18))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(x_range, y_range)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|value| tick(*value))
        .y_label_formatter(&|value| tick(*value))
        .x_desc(
            spec.x_label
                .clone()
                .or_else(|| spec.x.clone())
                .unwrap_or_default(),
        )
        .y_desc(spec.y_label.clone().unwrap_or_else(|| spec.y.clone()))
        .axis_style(theme.text)
        .label_style(label_style(theme, 13))
        .axis_desc_style(label_style(theme, 13))
        .bold_line_style(theme.grid)
        .light_line_style(TRANSPARENT)
        .draw()
        .map_err(plot_error)?;

    let (y_low, y_high) = {
        let range = chart.y_range();
        (range.start, range.end)
    };
    if let Some(label) = &spec.identity_line {
        let (x_low, x_high) = {
            let range = chart.x_range();
            (range.start, range.end)
        };
        let (from, to) = (x_low.max(y_low), x_high.min(y_high));
        if from < to {
            let style = theme.text.mix(0.45).stroke_width(1);
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(from, from), (to, to)],
                    style,
                )))
                .map_err(plot_error)?;
            let text_style = label_style(theme, 12).pos(Pos::new(HPos::Right, VPos::Bottom));
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("{label} "),
                    (to, to),
                    text_style,
                )))
                .map_err(plot_error)?;
        }
    }
    for (label, at) in &data.marks {
        let mark_style = theme.text.mix(0.6).stroke_width(1);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(*at, y_low), (*at, y_high)],
                mark_style,
            )))
            .map_err(plot_error)?;
        let text_style = label_style(theme, 12).pos(Pos::new(HPos::Left, VPos::Top));
        chart
            .draw_series(std::iter::once(Text::new(
                format!(" {label}"),
                (*at, y_high),
                text_style,
            )))
            .map_err(plot_error)?;
    }

    for (index, series) in data.series.iter().enumerate() {
        let colour = theme.palette[index % theme.palette.len()];
        let drawn = match spec.kind {
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
                    .map_err(plot_error)?
            }
            Kind::Points => chart
                .draw_series(
                    series
                        .points
                        .iter()
                        .map(|&(x, y, _)| Circle::new((x, y), 4, colour.filled())),
                )
                .map_err(plot_error)?,
            Kind::Segments => chart
                .draw_series(series.points.iter().map(|&(x, y, x_end)| {
                    PathElement::new(vec![(x, y), (x_end, y)], colour.stroke_width(3))
                }))
                .map_err(plot_error)?,
            Kind::Bar => unreachable!("bars are drawn by draw_bars"),
        };
        drawn
            .label(series.name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], colour.filled()));
    }
    let position = match spec.legend {
        Legend::None => return Ok(()),
        Legend::UpperRight => SeriesLabelPosition::UpperRight,
        Legend::UpperLeft => SeriesLabelPosition::UpperLeft,
        Legend::LowerRight => SeriesLabelPosition::LowerRight,
        Legend::LowerLeft => SeriesLabelPosition::LowerLeft,
    };
    if data.series.len() > 1 {
        chart
            .configure_series_labels()
            .position(position)
            .background_style(theme.legend_background)
            .border_style(theme.grid)
            .label_font(label_style(theme, 13))
            .draw()
            .map_err(plot_error)?;
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
