//! `{{#table}}`: a lab run's records as a Markdown table, with the caption
//! that names whose run it is, its mode and the clock its rows ran on.

use anyhow::{Context, Result, bail, ensure};

use super::{LabData, values::html_escape};
use crate::data::{Clock, PointKind};

pub(super) fn data_table(
    slug: &str,
    kind: PointKind,
    fields: &[&str],
    series: &[&str],
    clock: Clock,
    to_root: &str,
    lab_data: &LabData,
) -> Result<String> {
    let run = lab_data.run(slug)?;
    let points: Vec<_> = if series.is_empty() {
        run.points(kind).iter().collect()
    } else {
        let mut chosen = Vec::new();
        for name in series {
            let found: Vec<_> = run
                .points(kind)
                .iter()
                .filter(|point| point.series == *name)
                .collect();
            ensure!(!found.is_empty(), "no {kind:?} records for series {name:?}");
            chosen.extend(found);
        }
        chosen
    };
    ensure!(!points.is_empty(), "no {kind:?} records");
    // The wrapper lets the theme size data tables apart from prose tables;
    // the blank line after it makes mdBook read the table inside as Markdown.
    let mut table = String::from("\n<div class=\"lab-table\">\n\n| series |");
    let mut rule = String::from("|:--|");
    for field in fields {
        table.push_str(&format!(" `{field}` |"));
        rule.push_str("--:|");
    }
    table.push('\n');
    table.push_str(&rule);
    table.push('\n');
    for point in &points {
        table.push_str(&format!("| {} |", point.series));
        for field in fields {
            let value = point
                .values
                .get(*field)
                .with_context(|| format!("series {:?} has no field {field:?}", point.series))?;
            table.push_str(&format!(" {} |", value.display().replace('|', "\\|")));
        }
        table.push('\n');
    }
    let caption = if clock == Clock::Rows {
        run.caption_at(Clock::Measured, rows_time_scale(&points)?)
    } else {
        run.caption_for(clock)
    };
    table.push_str(&format!(
        "\n<p class=\"table-caption\">Lab <code>{}</code>, {}. \
         <a href=\"{to_root}lab-data/{}\">Data</a>.</p>\n</div>\n",
        slug.split('@').next().unwrap_or(slug),
        html_escape(&caption),
        super::data_file(slug)
    ));
    Ok(table)
}

/// The one `time_scale` every row of a `clock=rows` table ran at.
fn rows_time_scale(points: &[&lab_kit::record::Point]) -> Result<f64> {
    let mut scales = points
        .iter()
        .map(|point| match point.values.get("time_scale") {
            Some(lab_kit::Value::Num(scale)) => Ok(*scale),
            _ => bail!(
                "clock=rows: series {:?} has no numeric time_scale",
                point.series
            ),
        });
    let first = scales.next().context("no rows")??;
    for scale in scales {
        ensure!(
            (scale? - first).abs() < f64::EPSILON,
            "clock=rows: the rows ran at different time scales"
        );
    }
    Ok(first)
}
