//! `--set key=value`: change one of a lab's settings for one run, without
//! editing its code: "change one thing, predict, run, compare". The keys are
//! the fields of the lab's `Config` (the `params` of its meta record); a value
//! is read as the type the default has (a number stays a number, a list a
//! list). The run's meta record lists what was set, and every caption says so.

use anyhow::{Context, Result, anyhow, bail};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

/// The `--set` pairs of one command line, in the order given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    pairs: Vec<(String, String)>,
}

impl Settings {
    /// Adds one `key=value`.
    pub fn push(&mut self, pair: &str) -> Result<()> {
        let (key, value) = pair
            .split_once('=')
            .filter(|(key, _)| !key.trim().is_empty())
            .with_context(|| format!("--set {pair:?}: expected key=value"))?;
        self.pairs
            .push((key.trim().to_string(), value.trim().to_string()));
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// What was set, as `key=value` words (for the meta record).
    pub fn words(&self) -> Vec<String> {
        self.pairs
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect()
    }

    /// `config` with every setting applied. An unknown key, a value of
    /// another type than the default's, and a negative number where the
    /// default is not are refused with one line that names the key. A setting
    /// is one field: others that the lab derives from it for the mode (a
    /// duration scaled by `time_scale`) keep their value.
    pub fn apply<C: Serialize + DeserializeOwned>(&self, config: C) -> Result<C> {
        if self.pairs.is_empty() {
            return Ok(config);
        }
        let mut fields = match serde_json::to_value(&config).context("reading the settings")? {
            Value::Object(fields) => fields,
            _ => bail!("this lab has no settings to change"),
        };
        for (key, text) in &self.pairs {
            let Some(default) = fields.get(key) else {
                let known: Vec<&str> = fields
                    .iter()
                    .filter(|(_, value)| settable(value))
                    .map(|(name, _)| name.as_str())
                    .collect();
                bail!(
                    "--set {key}: no such setting; the settings are {}",
                    known.join(", ")
                );
            };
            let value = parse_like(default, text).with_context(|| format!("--set {key}={text}"))?;
            fields.insert(key.clone(), value);
        }
        serde_json::from_value(Value::Object(fields))
            .map_err(|error| anyhow!("--set {}: {error}", self.words().join(" --set ")))
    }
}

/// A lab's settings as `key=value` lines (lists comma-separated), in the
/// form `--set` takes them back; what cannot be set is left out.
pub fn lines(config: &impl Serialize) -> Result<Vec<String>> {
    let Value::Object(fields) = serde_json::to_value(config).context("reading the settings")?
    else {
        bail!("this lab has no settings");
    };
    Ok(fields
        .iter()
        .filter(|(_, value)| settable(value))
        .map(|(key, value)| format!("{key}={}", plain(value)))
        .collect())
}

fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(items) => items.iter().map(plain).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

fn settable(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.iter().all(settable),
        Value::Object(_) => false,
        _ => true,
    }
}

/// `text` read as a value of the same kind as `default`.
fn parse_like(default: &Value, text: &str) -> Result<Value> {
    match default {
        Value::String(_) => Ok(Value::String(text.to_string())),
        Value::Bool(_) => match text {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => bail!("expected true or false"),
        },
        Value::Number(number) => {
            let value: f64 = text
                .parse()
                .ok()
                .filter(|value: &f64| value.is_finite())
                .with_context(|| format!("expected a number like {number}"))?;
            let default = number.as_f64().unwrap_or(0.0);
            if value < 0.0 && default >= 0.0 {
                bail!("expected a number of at least 0 (the default is {number})");
            }
            if number.is_f64() {
                Ok(Value::from(value))
            } else if value.fract() == 0.0 && value.abs() < 9.0e15 {
                Ok(Value::from(value as i64))
            } else {
                bail!("expected a whole number like {number}")
            }
        }
        Value::Array(items) => {
            let like = items.first().cloned().unwrap_or(Value::from(0.0));
            text.split(',')
                .filter(|item| !item.trim().is_empty())
                .map(|item| parse_like(&like, item.trim()))
                .collect::<Result<Vec<_>>>()
                .map(Value::Array)
                .context("expected a comma-separated list")
        }
        Value::Null | Value::Object(_) => bail!("this setting cannot be set from the command line"),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct Demo {
        requests: usize,
        time_scale: f64,
        label: String,
        sweep: Vec<u32>,
        quiet: bool,
        offset_ms: f64,
    }

    fn demo() -> Demo {
        Demo {
            requests: 500,
            time_scale: 50.0,
            label: "a".into(),
            sweep: vec![1, 2],
            quiet: false,
            offset_ms: -1.0,
        }
    }

    fn set(pairs: &[&str]) -> Result<Demo> {
        let mut settings = Settings::default();
        for pair in pairs {
            settings.push(pair)?;
        }
        settings.apply(demo())
    }

    #[test]
    fn settings_change_only_what_they_name_and_keep_each_type() {
        let changed = set(&[
            "requests=20",
            "time_scale=12.5",
            "label=b",
            "sweep=5,10,20",
            "quiet=true",
        ])
        .expect("valid settings");
        assert_eq!(
            changed,
            Demo {
                requests: 20,
                time_scale: 12.5,
                label: "b".into(),
                sweep: vec![5, 10, 20],
                quiet: true,
                offset_ms: -1.0,
            }
        );
        assert_eq!(set(&[]).unwrap(), demo());
        // What `--settings` prints, `--set` takes back.
        let printed = lines(&changed).unwrap();
        assert!(
            printed.contains(&"sweep=5,10,20".to_string()),
            "{printed:?}"
        );
        let pairs: Vec<&str> = printed.iter().map(String::as_str).collect();
        assert_eq!(set(&pairs).unwrap(), changed);
    }

    #[test]
    fn a_bad_setting_is_one_line_naming_the_key() {
        let error = |pairs: &[&str]| format!("{:#}", set(pairs).expect_err("refused"));
        assert!(error(&["bogus=1"]).starts_with("--set bogus: no such setting; the settings are label, offset_ms, quiet, requests, sweep, time_scale"));
        assert!(error(&["requests=many"]).contains("--set requests=many: expected a number"));
        assert!(error(&["requests=2.5"]).contains("expected a whole number"));
        assert_eq!(set(&["requests=0"]).unwrap().requests, 0);
        assert!(error(&["time_scale=-3"]).contains("at least 0"));
        assert!(error(&["quiet=yes"]).contains("true or false"));
        assert!(error(&["sweep=1,x"]).contains("comma-separated"));
        assert!(error(&["requests"]).contains("expected key=value"));
        // A negative default may go further negative.
        assert_eq!(set(&["offset_ms=-5"]).unwrap().offset_ms, -5.0);
        for message in [error(&["bogus=1"]), error(&["requests=many"])] {
            assert!(!message.contains('\n'), "{message}");
        }
    }
}
