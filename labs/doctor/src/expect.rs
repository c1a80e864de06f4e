//! `--expect FILE`: what a service must show for a CI job to pass. A TOML
//! file names, for every check or for one, the grades that fail the build
//! (`fail-on`) and bounds on the number the check measured (`min`, `max`).
//! Without one, any warning or failure fails the build; with one, the build
//! fails exactly where a rule of the file is broken, and the report names
//! each broken rule.
//!
//! ```toml
//! # Warnings are for people; the build fails on failures only...
//! fail-on = ["fail"]
//!
//! # ...except here, where the balancer in front closes idle connections at
//! # 60 s: the service must close first, and say so.
//! [checks.idle-keepalive]
//! fail-on = ["warn", "fail"]
//! max = "55s"
//!
//! [checks.overload]
//! min = 100  # refusals at the top of the ramp: it must shed, not queue
//! ```

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::{
    duration::duration,
    finding::{Check, Finding, Grade},
};

/// The unit of the number a check measures (`Finding::value`), which its
/// `min` and `max` are in.
pub fn unit(check: Check) -> Unit {
    match check {
        Check::Overload => Unit::Count,
        _ => Unit::Seconds,
    }
}

/// A check's measured number: seconds (a bound may be written `"55s"`,
/// `"250ms"`, or as a number of seconds), or a count (a number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Seconds,
    Count,
}

/// The rules of one file.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectations {
    /// The file, as given: the report names it.
    pub file: String,
    /// The grades that fail the build for a check without its own `fail-on`.
    pub fail_on: Vec<Grade>,
    /// One entry a check the file names, in the report's order.
    pub rules: Vec<Rule>,
}

/// What one check must show.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub check: Check,
    pub fail_on: Option<Vec<Grade>>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// The outcome, as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judged {
    pub file: String,
    /// Each broken rule as a sentence: `idle-keepalive: max 55 s, measured
    /// "closed after 60.00 s"`.
    pub broken: Vec<String>,
}

/// Reads and checks a rule file; every mistake in it is an error naming
/// the file and the key.
pub fn read(path: &Path) -> Result<Expectations> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--expect {}: cannot read it", path.display()))?;
    parse(&text, &path.display().to_string())
        .with_context(|| format!("--expect {}", path.display()))
}

/// The rules in `text`, from the file named `file`.
pub fn parse(text: &str, file: &str) -> Result<Expectations> {
    let table: toml::Table = toml::from_str(text).map_err(|error| {
        // toml's own message draws the line and a caret: one line here.
        let at = error.span().map_or(String::new(), |span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |at| at + 1) + 1;
            format!(" at line {line}, column {column}")
        });
        anyhow::anyhow!("not TOML{at}: {}", error.message().trim())
    })?;
    let mut expectations = Expectations {
        file: file.to_string(),
        fail_on: vec![Grade::Warn, Grade::Fail],
        rules: Vec::new(),
    };
    for (key, value) in &table {
        match key.as_str() {
            "fail-on" => expectations.fail_on = grades(value, "fail-on")?,
            "checks" => {
                let Some(checks) = value.as_table() else {
                    bail!("checks: a table of checks ([checks.idle-keepalive] ...)");
                };
                for (name, rule) in checks {
                    let check = Check::named(name).with_context(|| {
                        format!("unknown check {name:?} (the checks: {})", Check::names())
                    })?;
                    expectations.rules.push(rule_for(check, rule)?);
                }
            }
            other => bail!("unknown key {other:?} (the keys: fail-on, checks)"),
        }
    }
    expectations.rules.sort_by_key(|rule| rule.check as usize);
    Ok(expectations)
}

fn rule_for(check: Check, value: &toml::Value) -> Result<Rule> {
    let name = check.name();
    let Some(table) = value.as_table() else {
        bail!("checks.{name}: a table (fail-on, min, max)");
    };
    let mut rule = Rule {
        check,
        fail_on: None,
        min: None,
        max: None,
    };
    for (key, value) in table {
        let at = format!("checks.{name}.{key}");
        match key.as_str() {
            "fail-on" => rule.fail_on = Some(grades(value, &at)?),
            "min" => rule.min = Some(bound(check, value, &at)?),
            "max" => rule.max = Some(bound(check, value, &at)?),
            other => bail!("checks.{name}: unknown key {other:?} (the keys: fail-on, min, max)"),
        }
    }
    if let (Some(min), Some(max)) = (rule.min, rule.max)
        && min > max
    {
        bail!("checks.{name}: min {min} is above max {max}");
    }
    Ok(rule)
}

/// `["warn", "fail"]`: the grades that fail the build (an empty list: none).
fn grades(value: &toml::Value, at: &str) -> Result<Vec<Grade>> {
    let Some(items) = value.as_array() else {
        bail!("{at}: a list of grades, such as [\"warn\", \"fail\"]");
    };
    items
        .iter()
        .map(|item| match item.as_str() {
            Some("warn") => Ok(Grade::Warn),
            Some("fail") => Ok(Grade::Fail),
            _ => bail!("{at}: {item} is not a grade that can fail a build (\"warn\" or \"fail\")"),
        })
        .collect()
}

/// A bound in the check's unit.
fn bound(check: Check, value: &toml::Value, at: &str) -> Result<f64> {
    let number = match (value, unit(check)) {
        (toml::Value::Integer(number), _) => *number as f64,
        (toml::Value::Float(number), _) => *number,
        (toml::Value::String(text), Unit::Seconds) => duration(text)
            .with_context(|| at.to_string())?
            .as_secs_f64(),
        (toml::Value::String(text), Unit::Count) => {
            bail!(
                "{at}: {text:?}: {} measures a count, so its bound is a number",
                check.name()
            )
        }
        (other, _) => bail!("{at}: {other} is not a number"),
    };
    if !number.is_finite() || number < 0.0 {
        bail!("{at}: {number} is not a bound (a number from 0 up)");
    }
    Ok(number)
}

impl Expectations {
    /// The rules `findings` break, one sentence each; a rule for a check
    /// that did not run, or measured no number for a bound, is broken too
    /// (a CI gate that passes because nothing was measured guards nothing).
    pub fn judge(&self, findings: &[Finding]) -> Judged {
        let mut broken = Vec::new();
        for finding in findings {
            let Some(check) = Check::named(finding.check) else {
                continue;
            };
            let rule = self.rules.iter().find(|rule| rule.check == check);
            let fail_on = rule
                .and_then(|rule| rule.fail_on.as_ref())
                .unwrap_or(&self.fail_on);
            if fail_on.contains(&finding.grade) {
                broken.push(format!(
                    "{}: {} ({:?}), and fail-on holds {:?}",
                    finding.check,
                    finding.grade.label(),
                    finding.measured,
                    finding.grade.label().to_lowercase()
                ));
            }
            let Some(rule) = rule else { continue };
            for (word, bound) in [("min", rule.min), ("max", rule.max)] {
                let Some(bound) = bound else { continue };
                let holds = |value: f64| {
                    if word == "min" {
                        value >= bound
                    } else {
                        value <= bound
                    }
                };
                let shown = show(check, bound);
                match finding.value {
                    _ if finding.grade == Grade::Skip => broken.push(format!(
                        "{}: {word} {shown}, but the check was skipped ({})",
                        finding.check, finding.why
                    )),
                    None => broken.push(format!(
                        "{}: {word} {shown}, but it measured no number ({:?})",
                        finding.check, finding.measured
                    )),
                    Some(value) if !holds(value) => broken.push(format!(
                        "{}: {word} {shown}, measured {:?}",
                        finding.check, finding.measured
                    )),
                    Some(_) => {}
                }
            }
        }
        for rule in &self.rules {
            if !findings.iter().any(|f| f.check == rule.check.name()) {
                broken.push(format!(
                    "{}: the file has a rule for it, but it did not run",
                    rule.check.name()
                ));
            }
        }
        Judged {
            file: self.file.clone(),
            broken,
        }
    }
}

/// A bound as the report writes it: `55 s`, `0.25 s`, `100`.
fn show(check: Check, bound: f64) -> String {
    match unit(check) {
        Unit::Seconds => format!("{bound} s"),
        Unit::Count => format!("{bound}"),
    }
}
