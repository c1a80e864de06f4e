//! Drawing with plotters into SVG text. Backgrounds stay transparent so the
//! page shows through; text, axes and the palette change with the theme.

mod bars;
mod legend;
mod theme;
mod xy;

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use super::{ChartSpec, Kind, Prepared};

pub use theme::{PALETTE_SIZE, THEMES, Theme};

/// The shortest a segment is drawn, in pixels.
const MIN_SEGMENT_PX: i32 = 4;

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
        let legend = legend::legend_entries(spec, data);
        let legend_rows = legend::legend_rows(&legend);
        let plot = if legend_rows.is_empty() {
            plot
        } else {
            let height = plot.dim_in_pixel().1;
            let band = legend_rows.len() as u32 * LEGEND_ROW + 4;
            let (plot, legend_area) = plot.split_vertically(height - band);
            legend::draw_legend(&legend_area, &legend_rows, theme)?;
            plot
        };
        match spec.kind {
            Kind::Bar => bars::draw_bars(&plot, spec, data, theme)?,
            Kind::Line | Kind::Points | Kind::Segments => {
                let (x_min, x_max) = padded(spec, data, true, spec.log_x);
                let (y_min, y_max) = padded(spec, data, false, spec.log_y);
                let (x, y) = (x_min..x_max, y_min..y_max);
                match (spec.log_x, spec.log_y) {
                    (false, false) => xy::draw_xy(&plot, spec, data, theme, x, y)?,
                    (true, false) => xy::draw_xy(&plot, spec, data, theme, x.log_scale(), y)?,
                    (false, true) => xy::draw_xy(&plot, spec, data, theme, x, y.log_scale())?,
                    (true, true) => {
                        xy::draw_xy(&plot, spec, data, theme, x.log_scale(), y.log_scale())?
                    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_read_well() {
        for (value, shown) in [
            (1200.0, "1200"),
            (0.25, "0.25"),
            (12.345, "12.3"),
            (5.0, "5"),
        ] {
            assert_eq!(tick(value), shown, "{value}");
        }
    }
}
