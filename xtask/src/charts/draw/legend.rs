//! The legend, in its own band below the plot (never over the data): the
//! series names wrapped into rows that fit, a swatch before each.

use anyhow::Result;
use plotters::{
    coord::Shift,
    prelude::*,
    style::text_anchor::{HPos, Pos, VPos},
};

use super::{LEGEND_FONT, LEGEND_ROW, MARGIN, Theme, WIDTH, Y_LABEL_AREA, label_style, plot_error};
use crate::charts::{ChartSpec, Kind, Legend, Prepared, layout};

/// The series names a legend shows, with their palette index; none for bar
/// charts (the names are on the x axis) or for a single series, but the
/// machines of a comparison.
pub(super) fn legend_entries(spec: &ChartSpec, data: &Prepared) -> Vec<(String, usize)> {
    if !data.groups.is_empty() {
        // A comparison: every machine, by its name, even when there is one.
        return data
            .series
            .iter()
            .map(|series| (series.name.clone(), series.colour))
            .collect();
    }
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
pub(super) fn legend_rows(entries: &[(String, usize)]) -> Vec<Vec<(String, usize)>> {
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
pub(super) fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    rows: &[Vec<(String, usize)>],
    theme: &Theme,
) -> Result<()> {
    let style = label_style(theme, LEGEND_FONT).pos(Pos::new(HPos::Left, VPos::Center));
    for (row_index, row) in rows.iter().enumerate() {
        let middle = (row_index as u32 * LEGEND_ROW + LEGEND_ROW / 2) as i32;
        let mut cursor = f64::from(MARGIN + Y_LABEL_AREA);
        for (name, index) in row {
            let colour = theme.colour(*index);
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
