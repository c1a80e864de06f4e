//! The records a lab prints, one JSON object a line, each wrapped in a
//! `{"type": ..., "data": ...}` envelope:
//!
//! - `meta`: exactly one, first: which lab, which mode, when, with which
//!   parameters, on which machine.
//! - `sample`: one observation in a named series (a point on a chart).
//! - `summary`: one aggregate for a named series (a bar, a table row).
//!
//! The xtask parses every line a lab prints with these same types, so a lab
//! cannot write a record the charts will not understand.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail, ensure};
use serde::{Deserialize, Serialize};

use crate::{machine::Machine, mode::Mode};

/// One line of a lab's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "lowercase")]
pub enum Record {
    /// Boxed: it is far larger than a point, and there is one per run.
    Meta(Box<Meta>),
    Sample(Point),
    Summary(Point),
}

/// What a run was: the first record of every lab's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// The lab's slug, as in `labs/<slug>`.
    pub lab: String,
    pub mode: Mode,
    /// When the run started, RFC 3339 UTC.
    pub started: String,
    /// How much faster than production the run's clock is: 1 means real time
    /// scales; 50 means a 60 s timeout was run as 1.2 s. Captions print it.
    #[serde(default = "one")]
    pub time_scale: f64,
    /// The lab's parameters, as the lab's `Config` had them.
    pub params: Fields,
    /// What the command line changed (`--set key=value`), as `key=value`;
    /// empty for a run with the lab's own settings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<String>,
    /// The machine's name (`--name alice`), for a workshop's comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The id of the binary that made the run (`binary::id_of`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    pub machine: Machine,
}

fn one() -> f64 {
    1.0
}

impl Meta {
    /// The meta record of a run starting now on this machine: the lab's slug,
    /// its mode, its time compression (1 for none) and its `Config`.
    pub fn describe(
        lab: &str,
        mode: Mode,
        time_scale: f64,
        params: &impl Serialize,
    ) -> Result<Meta> {
        Ok(Meta {
            lab: lab.to_string(),
            mode,
            started: crate::time::now_rfc3339(),
            time_scale,
            params: to_fields(params)?,
            set: Vec::new(),
            name: None,
            binary: crate::binary::own_id(),
            machine: Machine::collect(),
        })
    }
}

/// What a lab compares: a server setup, a retry policy, a deploy, a way to
/// write a handler. Every lab's compared type implements it, whatever the lab's
/// world calls that thing, and its `series()` is the `series` of the records it
/// produces, the name charts, tables and the chapter's `{{#value}}` use.
pub trait Series {
    /// The series name: lowercase words joined by `-`, maybe a `family/`
    /// prefix (`hyper-timer`, `close/axum-serve`).
    fn series(&self) -> String;
}

/// A sample or a summary: a named series and flat, scalar fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Point {
    pub series: String,
    pub values: Fields,
}

/// Flat fields: names to scalars or to lists of scalars. Nested objects and
/// lists of lists are refused, so every field can become an axis, a set of
/// marks or a table column.
pub type Fields = BTreeMap<String, Value>;

/// A field value: a scalar, or a list of scalars (the points of a sweep, the
/// names a run compared, the times a chart marks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Num(f64),
    Text(String),
    List(Vec<Value>),
}

impl Value {
    /// The value as a number, if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(whole) => Some(*whole as f64),
            Value::Num(real) => Some(*real),
            Value::Bool(_) | Value::Text(_) | Value::List(_) => None,
        }
    }

    /// The value as a list of numbers, if it is one (an empty list is one).
    pub fn as_numbers(&self) -> Option<Vec<f64>> {
        match self {
            Value::List(items) => items.iter().map(Value::as_f64).collect(),
            _ => None,
        }
    }

    /// The value as it reads in a table cell.
    pub fn display(&self) -> String {
        match self {
            Value::Bool(flag) => flag.to_string(),
            Value::Int(whole) => whole.to_string(),
            Value::Num(real) if real.fract() == 0.0 && real.abs() < 1e15 => format!("{real:.0}"),
            Value::Num(real) if real.abs() >= 100.0 => format!("{real:.0}"),
            Value::Num(real) if real.abs() >= 10.0 => format!("{real:.1}"),
            Value::Num(real) => format!("{real:.2}"),
            Value::Text(text) => text.clone(),
            Value::List(items) => items
                .iter()
                .map(Value::display)
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

impl Point {
    /// A numeric field, or an error naming the series and the field.
    pub fn number(&self, field: &str) -> Result<f64> {
        self.values
            .get(field)
            .with_context(|| format!("series {:?} has no field {field:?}", self.series))?
            .as_f64()
            .with_context(|| {
                format!(
                    "field {field:?} of series {:?} is not a number",
                    self.series
                )
            })
    }
}

/// Turns any serializable struct with scalar fields into [`Fields`].
pub fn to_fields(value: &impl Serialize) -> Result<Fields> {
    let json = serde_json::to_value(value).context("serializing fields")?;
    let serde_json::Value::Object(map) = json else {
        bail!("fields must serialize to a JSON object, got {json}");
    };
    let mut fields = Fields::new();
    for (name, item) in map {
        let value = match item {
            serde_json::Value::Array(items) => Value::List(
                items
                    .into_iter()
                    .map(|item| scalar(&name, item))
                    .collect::<Result<_>>()?,
            ),
            item => scalar(&name, item)?,
        };
        fields.insert(name, value);
    }
    Ok(fields)
}

fn scalar(name: &str, item: serde_json::Value) -> Result<Value> {
    Ok(match item {
        serde_json::Value::Bool(flag) => Value::Bool(flag),
        serde_json::Value::Number(number) => match number.as_i64() {
            Some(whole) => Value::Int(whole),
            None => Value::Num(
                number
                    .as_f64()
                    .with_context(|| format!("field {name:?} is not representable"))?,
            ),
        },
        serde_json::Value::String(text) => Value::Text(text),
        serde_json::Value::Null => bail!("field {name:?} is null (a NaN or a missing value)"),
        other => bail!("field {name:?} is not a scalar or a list of scalars: {other}"),
    })
}

/// Checks one parsed record for what serde cannot: finite numbers, non-empty names.
pub fn check(record: &Record) -> Result<()> {
    let (fields, series) = match record {
        Record::Meta(meta) => {
            ensure!(!meta.lab.is_empty(), "meta has an empty lab name");
            ensure!(
                meta.time_scale.is_finite() && meta.time_scale > 0.0,
                "meta has a time_scale that is not a positive number"
            );
            (&meta.params, None)
        }
        Record::Sample(point) | Record::Summary(point) => (&point.values, Some(&point.series)),
    };
    if let Some(series) = series {
        ensure!(!series.is_empty(), "a record has an empty series name");
    }
    for (name, value) in fields {
        let items = match value {
            Value::List(items) => items.as_slice(),
            scalar => std::slice::from_ref(scalar),
        };
        for item in items {
            match item {
                Value::Num(real) => {
                    ensure!(real.is_finite(), "field {name:?} is not a finite number")
                }
                Value::List(_) => bail!("field {name:?} is a list of lists"),
                _ => {}
            }
        }
    }
    Ok(())
}

/// Parses and checks one line of a lab's output.
pub fn parse_line(line: &str) -> Result<Record> {
    let record: Record = serde_json::from_str(line).map_err(|error| anyhow::anyhow!("{error}"))?;
    check(&record)?;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Example {
        requests: u64,
        p50_ms: f64,
        outcome: &'static str,
    }

    #[test]
    fn fields_round_trip_through_a_line() {
        let point = Point {
            series: "shared-pool".into(),
            values: to_fields(&Example {
                requests: 500,
                p50_ms: 1.25,
                outcome: "ok",
            })
            .unwrap(),
        };
        let line = serde_json::to_string(&Record::Summary(point.clone())).unwrap();
        assert!(line.starts_with(r#"{"type":"summary","data":{"#), "{line}");
        assert_eq!(parse_line(&line).unwrap(), Record::Summary(point));
    }

    #[test]
    fn refuses_nested_fields_and_unknown_types() {
        let nested = serde_json::json!({"a": {"b": 1}});
        assert!(to_fields(&nested).is_err());
        assert!(parse_line(r#"{"type":"bogus","data":{}}"#).is_err());
        assert!(
            parse_line(r#"{"type":"sample","data":{"series":"x","values":{"a":[[1]]}}}"#).is_err()
        );
        assert!(
            parse_line(r#"{"type":"sample","data":{"series":"x","values":{"a":[{"b":1}]}}}"#)
                .is_err()
        );
        assert!(to_fields(&serde_json::json!({"a": [[1]]})).is_err());
        assert!(parse_line(r#"{"type":"sample","data":{"series":"","values":{}}}"#).is_err());
        assert!(
            parse_line(r#"{"type":"sample","data":{"series":"x","values":{},"extra":1}}"#).is_err()
        );
        assert!(parse_line(r#"{"type":"sample","data":{"series":"x","#).is_err());
    }

    #[test]
    fn integers_stay_integers() {
        let record =
            parse_line(r#"{"type":"sample","data":{"series":"x","values":{"n":3,"r":0.5}}}"#)
                .unwrap();
        let Record::Sample(point) = record else {
            panic!("expected a sample")
        };
        assert_eq!(point.values["n"], Value::Int(3));
        assert_eq!(point.values["r"], Value::Num(0.5));
    }

    #[test]
    fn lists_of_scalars_round_trip_and_read_as_numbers() {
        #[derive(Serialize)]
        struct Sweep {
            points: Vec<u32>,
            names: Vec<&'static str>,
        }
        let fields = to_fields(&Sweep {
            points: vec![1, 8, 64],
            names: vec!["shared", "fresh"],
        })
        .unwrap();
        assert_eq!(fields["points"].as_numbers(), Some(vec![1.0, 8.0, 64.0]));
        assert_eq!(fields["names"].as_numbers(), None);
        assert_eq!(fields["names"].display(), "shared, fresh");
        let point = Point {
            series: "x".into(),
            values: fields,
        };
        let line = serde_json::to_string(&Record::Sample(point.clone())).unwrap();
        assert_eq!(parse_line(&line).unwrap(), Record::Sample(point));
        let with_nan = Point {
            series: "x".into(),
            values: [("a".to_string(), Value::List(vec![Value::Num(f64::NAN)]))].into(),
        };
        assert!(check(&Record::Sample(with_nan)).is_err());
    }
}
