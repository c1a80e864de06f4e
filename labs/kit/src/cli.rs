//! The `main` every lab shares: parse `--quick` / `--full`, run the lab on a
//! multi-thread runtime under a hard time budget, print errors once, exit 2.

use std::{fmt, str::FromStr};
#[cfg(feature = "runtime")]
use std::{future::Future, process::ExitCode, time::Duration};

#[cfg(feature = "runtime")]
use anyhow::Context;
use anyhow::{Result, bail};
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

pub use crate::manifest::LabInfo;

/// Parses the command line, runs `lab` with the mode and an [`Output`] on
/// stdout, and turns the outcome into an exit code. Every failure, a blown
/// budget included, becomes one line on stderr and exit code 2.
#[cfg(feature = "runtime")]
pub fn run_lab<F, Fut>(manifest: &str, lab: F) -> ExitCode
where
    F: FnOnce(Mode, Output) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    exit_code(
        LabInfo::from_manifest(manifest).and_then(|info| {
            parse_and_run(&info, lab).with_context(|| format!("lab-{}", info.slug))
        }),
    )
}

/// The `main` of a lab's subcommand (a check of the reader's own server, for
/// example): runs `work` on a current-thread runtime; success is exit 0, and
/// a failure its error chain on one line of stderr and exit 2. `work` bounds
/// its own time.
#[cfg(feature = "runtime")]
pub fn run_subcommand(work: impl Future<Output = Result<()>>) -> ExitCode {
    exit_code(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the tokio runtime")
            .and_then(|runtime| runtime.block_on(work)),
    )
}

/// Exit 0, or the error chain on one line of stderr and exit 2.
#[cfg(feature = "runtime")]
fn exit_code(outcome: Result<()>) -> ExitCode {
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
    let Some(mode) = parse_mode(&std::env::args().skip(1).collect::<Vec<_>>())? else {
        println!(
            "lab-{}: {}\n\nUsage: lab-{} [--quick | --full]\n\n\
             Prints JSON Lines records to stdout and progress to stderr.\n\
             --quick  seconds; the default (budget {:?})\n\
             --full   closer to production scales (budget {:?})",
            info.slug, info.about, info.slug, info.quick_budget, info.full_budget
        );
        return Ok(());
    };
    let budget = info.budget(mode);
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

/// The mode a lab's command line asks for (quick unless `--full`), or `None`
/// for `--help`.
pub fn parse_mode(args: &[String]) -> Result<Option<Mode>> {
    let mut mode = Mode::Quick;
    let mut flags = crate::flags::Flags::switches_only(args);
    while let Some(flag) = flags.next_flag()? {
        match flag.name {
            "--quick" => mode = Mode::Quick,
            "--full" => mode = Mode::Full,
            "-h" | "--help" => return Ok(None),
            _ => return Err(flag.unknown()),
        }
    }
    Ok(Some(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lab_command_line_names_a_mode_or_asks_for_help() {
        let args = |words: &[&str]| {
            words
                .iter()
                .map(|word| word.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(parse_mode(&args(&[])).unwrap(), Some(Mode::Quick));
        assert_eq!(parse_mode(&args(&["--full"])).unwrap(), Some(Mode::Full));
        assert_eq!(
            parse_mode(&args(&["--full", "--quick"])).unwrap(),
            Some(Mode::Quick)
        );
        assert_eq!(parse_mode(&args(&["--help"])).unwrap(), None);
        let error = parse_mode(&args(&["--slow"])).unwrap_err().to_string();
        assert_eq!(error, "unknown flag \"--slow\"");
    }

    #[test]
    fn modes_parse_and_print() {
        assert_eq!("quick".parse::<Mode>().unwrap(), Mode::Quick);
        assert_eq!("--full".parse::<Mode>().unwrap(), Mode::Full);
        assert!("slow".parse::<Mode>().is_err());
        assert_eq!(Mode::Full.to_string(), "full");
    }
}
