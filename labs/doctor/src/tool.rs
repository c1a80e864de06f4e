//! The `doctor` binary's `main` (`src/bin/doctor.rs` only calls it): parse
//! the flags, run the checks with one line of progress each, print the report
//! (text or `--json`) and exit 0, 1 or 2. In the library rather than in the
//! binary, as every lab's `main` is, because a binary crate compiles the
//! generic code it reaches again (ARCHITECTURE.md, "Timings and build profiles").

use std::{
    io::{IsTerminal, Write},
    process::ExitCode,
    time::Duration,
};

use lab_kit::exit::{self, Exit};

use crate::{Check, Finding, Report, checks, options};

/// Who speaks in the doctor's error line.
const PROGRAM: &str = "doctor";

/// Progress on stderr: one line a check as it ends.
struct Lines {
    quiet: bool,
}

impl checks::Progress for Lines {
    fn started(&self, checks: &[Check], bound: Duration) {
        if !self.quiet {
            eprintln!(
                "doctor: {} checks, at most {:.0} s (the watching checks run at once)",
                checks.len(),
                bound.as_secs_f64()
            );
        }
    }

    fn finished(&self, finding: &Finding, done: usize, of: usize) {
        if !self.quiet {
            eprintln!(
                "[{done}/{of}] {:5} {}: {}",
                finding.grade.label(),
                finding.check,
                finding.measured
            );
        }
    }
}

/// The `doctor` command: see [`options::usage`].
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if lab_kit::flags::asks_for_help(&args) {
        let _ = writeln!(std::io::stdout(), "{}", options::usage());
        return ExitCode::SUCCESS;
    }
    let options = match options::parse(&args) {
        Ok(options) => options,
        Err(error) => return exit::exit_code(PROGRAM, Err(error)),
    };
    let progress = Lines {
        quiet: options.json && !std::io::stderr().is_terminal(),
    };
    let outcome = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| {
            let findings =
                runtime.block_on(checks::run(&options, &progress, checks::Turn::alone()));
            // Whatever a check left behind (a hung connection) is dropped here.
            runtime.shutdown_timeout(Duration::from_millis(200));
            findings
        });
    match outcome {
        Ok(ran) => {
            let report = Report::new(&options, ran);
            if let Some(path) = &options.json_out
                && let Err(error) = write_json(path, &report)
            {
                return exit::exit_code(PROGRAM, Err(error));
            }
            let printed = if options.json {
                serde_json::to_string(&report).map_err(anyhow::Error::from)
            } else {
                Ok(report.text())
            };
            match printed {
                Ok(text) => {
                    let _ = writeln!(std::io::stdout(), "{text}");
                    ExitCode::from(report.exit)
                }
                Err(error) => exit::exit_code(PROGRAM, Err(error.context("encoding the report"))),
            }
        }
        Err(error) => {
            // The JSON in place of a report: on stdout with --json, and in
            // a CI job's artifact, which says why there is no report.
            let line =
                serde_json::json!({ "error": format!("{error:#}"), "exit": Exit::Error.code() });
            if options.json {
                let _ = writeln!(std::io::stdout(), "{line}");
            }
            if let Some(path) = &options.json_out
                && let Err(written) = write_json(path, &line)
            {
                return exit::exit_code(PROGRAM, Err(written));
            }
            exit::exit_code(PROGRAM, Err(error.context("could not probe")))
        }
    }
}

/// The JSON report in `path`, whole or not at all: written to a temporary
/// file beside it, then renamed over it.
fn write_json(path: &std::path::Path, report: &impl serde::Serialize) -> anyhow::Result<()> {
    use anyhow::Context;
    let context = || format!("--json-out {}", path.display());
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => std::path::Path::new("."),
    };
    let mut file = tempfile::NamedTempFile::new_in(folder).with_context(context)?;
    serde_json::to_writer(&mut file, report).with_context(context)?;
    writeln!(file).with_context(context)?;
    file.persist(path)
        .map_err(|error| error.error)
        .with_context(context)?;
    Ok(())
}
