//! The `main` every lab shares: parse `--quick` / `--full`, run the lab on a
//! multi-thread runtime under a hard time budget, print errors once, exit 2.

use std::{fmt, str::FromStr, time::Duration};
#[cfg(feature = "runtime")]
use std::{future::Future, process::ExitCode};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

#[cfg(feature = "runtime")]
use crate::record::Output;

/// How long and how thoroughly a lab measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Seconds: for tests and the default book build.
    Quick,
    /// Closer to production time scales and sample sizes.
    Full,
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

/// What a lab's `main` needs to know about itself. It comes from the lab's
/// own Cargo.toml (see [`LabInfo::from_manifest`]), the one place the xtask
/// reads it from too, so the lab's budget and the xtask's kill timer agree.
#[derive(Debug, Clone, PartialEq)]
pub struct LabInfo {
    pub slug: String,
    pub about: String,
    /// The lab fails, rather than hangs, past this.
    pub quick_budget: Duration,
    pub full_budget: Duration,
}

impl LabInfo {
    /// Reads `name = "lab-<slug>"`, `description`, and `quick-budget` and
    /// `full-budget` (seconds, under `[package.metadata.lab]`) from the text
    /// of a lab's Cargo.toml: `LabInfo::from_manifest(include_str!("../Cargo.toml"))`.
    pub fn from_manifest(manifest: &str) -> Result<LabInfo> {
        let value = |key: &str| -> Option<&str> {
            manifest.lines().find_map(|line| {
                let (name, value) = line.split_once('=')?;
                (name.trim() == key).then(|| value.trim().trim_matches('"'))
            })
        };
        let name = value("name").context("the manifest has no package name")?;
        let slug = name
            .strip_prefix("lab-")
            .with_context(|| format!("package {name:?} is not named lab-<slug>"))?;
        let seconds = |key: &str| -> Result<Duration> {
            let text =
                value(key).with_context(|| format!("the manifest of {name} has no {key}"))?;
            let whole: u64 = text
                .parse()
                .with_context(|| format!("{key} = {text:?} is not whole seconds"))?;
            Ok(Duration::from_secs(whole))
        };
        Ok(LabInfo {
            slug: slug.to_string(),
            about: value("description").unwrap_or_default().to_string(),
            quick_budget: seconds("quick-budget")?,
            full_budget: seconds("full-budget")?,
        })
    }
}

/// Parses the command line, runs `lab` with the mode and an [`Output`] on
/// stdout, and turns the outcome into an exit code. Every failure, a blown
/// budget included, becomes one line on stderr and exit code 2.
#[cfg(feature = "runtime")]
pub fn run_lab<F, Fut>(manifest: &str, lab: F) -> ExitCode
where
    F: FnOnce(Mode, Output) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let outcome = LabInfo::from_manifest(manifest)
        .and_then(|info| parse_and_run(&info, lab).with_context(|| format!("lab-{}", info.slug)));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(feature = "runtime")]
fn parse_and_run<F, Fut>(info: &LabInfo, lab: F) -> Result<()>
where
    F: FnOnce(Mode, Output) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let mut mode = Mode::Quick;
    for argument in std::env::args().skip(1) {
        match argument.as_str() {
            "-h" | "--help" => {
                println!(
                    "lab-{}: {}\n\nUsage: lab-{} [--quick | --full]\n\n\
                     Prints JSON Lines records to stdout and progress to stderr.\n\
                     --quick  seconds; the default (budget {:?})\n\
                     --full   closer to production scales (budget {:?})",
                    info.slug, info.about, info.slug, info.quick_budget, info.full_budget
                );
                return Ok(());
            }
            other => {
                mode = other
                    .parse()
                    .with_context(|| format!("bad argument {other:?}"))?
            }
        }
    }
    let budget = match mode {
        Mode::Quick => info.quick_budget,
        Mode::Full => info.full_budget,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let outcome = runtime.block_on(async {
        tokio::time::timeout(budget, lab(mode, Output::stdout()))
            .await
            .unwrap_or_else(|_| bail!("did not finish within its {budget:?} budget ({mode} mode)"))
    });
    // Tasks a failed lab left behind (a stuck server, a hung client) must not
    // keep the process alive: give them a moment, then drop them.
    runtime.shutdown_timeout(Duration::from_millis(500));
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_lab_manifest() {
        let manifest = "[package]\nname = \"lab-demo\"\ndescription = \"a demo\"\n\n\
                        [package.metadata.lab]\nquick-budget = 15\nfull-budget = 120\n";
        let info = LabInfo::from_manifest(manifest).unwrap();
        assert_eq!(info.slug, "demo");
        assert_eq!(info.about, "a demo");
        assert_eq!(info.quick_budget, Duration::from_secs(15));
        assert_eq!(info.full_budget, Duration::from_secs(120));
        assert!(LabInfo::from_manifest("name = \"xtask\"").is_err());
        assert!(LabInfo::from_manifest("name = \"lab-x\"\nquick-budget = soon").is_err());
    }

    #[test]
    fn modes_parse_and_print() {
        assert_eq!("quick".parse::<Mode>().unwrap(), Mode::Quick);
        assert_eq!("--full".parse::<Mode>().unwrap(), Mode::Full);
        assert!("slow".parse::<Mode>().is_err());
        assert_eq!(Mode::Full.to_string(), "full");
    }
}
