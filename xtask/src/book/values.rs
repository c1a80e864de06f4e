//! A measured value as the book shows it: one field of one summary record,
//! rendered with a tooltip naming its source; the HTML escaping every
//! rendered directive uses. Below `directives`, `claims` and `table`, which
//! all read values this way.

use anyhow::{Context, Result, ensure};

use super::LabData;
use crate::data::PointKind;

/// One field of the one summary record of `series` in lab `slug`'s run.
pub(super) fn summary_field<'a>(
    slug: &str,
    series: &str,
    field: &str,
    lab_data: &'a LabData,
) -> Result<&'a lab_kit::Value> {
    let run = lab_data.run(slug)?;
    let mut found = run
        .points(PointKind::Summary)
        .iter()
        .filter(|point| point.series == series);
    let point = found
        .next()
        .with_context(|| format!("no summary record for series {series:?}"))?;
    ensure!(
        found.next().is_none(),
        "more than one summary record for series {series:?}: which one is meant?"
    );
    point
        .values
        .get(field)
        .with_context(|| format!("series {series:?} has no field {field:?}"))
}

/// `{{#value}}`: the field as a table shows it, its tooltip naming its source.
pub(super) fn data_value(
    slug: &str,
    series: &str,
    field: &str,
    lab_data: &LabData,
) -> Result<String> {
    let value = summary_field(slug, series, field, lab_data)?;
    Ok(format!(
        "<span class=\"lab-value\" title=\"book/data/{}: {} / {}\">{}</span>",
        super::data_file(slug),
        html_escape(series),
        html_escape(field),
        html_escape(&value.display())
    ))
}

pub(super) fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
