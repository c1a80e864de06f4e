//! How long and how thoroughly a lab measures: `--quick` (the default) or
//! `--full`, and the one way a setting takes a value for each
//! ([`Mode::pick`]).

use std::{fmt, str::FromStr};

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

/// How long and how thoroughly a lab measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Seconds: for tests and the default book build.
    Quick,
    /// Closer to production time scales and sample sizes.
    Full,
}

impl Mode {
    /// The value for this mode: `time_scale: mode.pick(50.0, 10.0)` keeps a
    /// setting's two values beside its name.
    pub fn pick<T>(self, quick: T, full: T) -> T {
        match self {
            Mode::Quick => quick,
            Mode::Full => full,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Mode::Quick => "quick",
            Mode::Full => "full",
        })
    }
}

impl FromStr for Mode {
    type Err = anyhow::Error;
    fn from_str(text: &str) -> Result<Mode> {
        match text {
            "quick" | "--quick" => Ok(Mode::Quick),
            "full" | "--full" => Ok(Mode::Full),
            other => bail!("unknown mode {other:?} (expected quick or full)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        assert_eq!("quick".parse::<Mode>().unwrap(), Mode::Quick);
        assert_eq!("--full".parse::<Mode>().unwrap(), Mode::Full);
        assert!("slow".parse::<Mode>().is_err());
        assert_eq!(Mode::Full.to_string(), "full");
    }
}
