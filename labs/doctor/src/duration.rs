//! Durations as the doctor's flags and rule files write them: `60s`, `1.5s`,
//! `250ms`, `2m`. Below both `options` and `expect`, which read them.

use std::time::Duration;

use anyhow::{Context, Result, bail};

/// `60s`, `1.5s`, `250ms`, `2m`.
pub fn duration(text: &str) -> Result<Duration> {
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => text.split_at(at),
        None => bail!("{text:?} has no unit: write 60s, 1.5s, 250ms or 2m"),
    };
    let value: f64 = number
        .parse()
        .with_context(|| format!("{text:?} is not a duration"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => bail!("{text:?}: unknown unit {unit:?} (ms, s or m)"),
    };
    if !seconds.is_finite() || seconds <= 0.0 || seconds > 3600.0 {
        bail!("{text:?} is not a duration between 1 ms and 1 hour");
    }
    Ok(Duration::from_secs_f64(seconds))
}
