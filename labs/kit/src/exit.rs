//! The one error path of every binary in the workspace (the labs, their
//! subcommands and children, the doctor, the exercises' checks, the xtask):
//! the exit codes, named once, and the one line an error is printed as.
//!
//! Every program here means the same by its exit code, so a script, a test
//! or the xtask can read any of them alike: 0 it did what was asked, 1 it ran
//! and found a problem (a check failed, the doctor has findings, a task
//! failed), 2 it could not do what was asked (bad input, or an error on the
//! way). An error is one line on stderr, `error: <program>: <message>`, the
//! program naming which process of several (a lab, its prober, its server)
//! speaks, the message the error's chain joined by `: `.

use std::{fmt, process::ExitCode};

/// What a program's exit code says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done as asked; a check passed, a probe found nothing wrong.
    Success,
    /// 1: ran and found a problem: a check failed, the doctor or the
    /// shutdown probe found something, an xtask task failed.
    Failed,
    /// 2: could not do what was asked: bad input, or an error on the way.
    Error,
}

impl Exit {
    /// The code as a number, for a report that prints it.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failed => 1,
            Exit::Error => 2,
        }
    }

    /// A child's exit code passed on as ours (the xtask runs the doctor, a
    /// namespace helper runs its command): a code past 255, or none (killed by
    /// a signal), is [`Exit::Error`], since the child could not finish.
    pub fn passed_on(code: Option<i32>) -> ExitCode {
        match code.and_then(|code| u8::try_from(code).ok()) {
            Some(code) => ExitCode::from(code),
            None => Exit::Error.into(),
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        match exit {
            Exit::Success => ExitCode::SUCCESS,
            Exit::Failed => ExitCode::from(1),
            Exit::Error => ExitCode::from(2),
        }
    }
}

/// Bad usage or bad input, as against a run that failed: a program that
/// tells the two apart (the xtask: 2 against 1) looks for this in the
/// error's chain; every other program exits 2 on any error anyway.
#[derive(Debug)]
pub struct BadInput(pub String);

impl fmt::Display for BadInput {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// An error that says the input was bad.
pub fn bad_input(message: impl Into<String>) -> anyhow::Error {
    BadInput(message.into()).into()
}

/// Whether `error` is (or wraps) [`BadInput`].
pub fn is_bad_input(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| cause.is::<BadInput>())
}

/// The line an error is printed as: `error: <program>: <chain>`.
pub fn error_line(program: &str, error: &anyhow::Error) -> String {
    format!("error: {program}: {error:#}")
}

/// Prints `error` as its one line on stderr.
pub fn report(program: &str, error: &anyhow::Error) {
    eprintln!("{}", error_line(program, error));
}

/// Exit 0, or the error printed as its one line and exit 2.
pub fn exit_code(program: &str, outcome: anyhow::Result<()>) -> ExitCode {
    match outcome {
        Ok(()) => Exit::Success.into(),
        Err(error) => {
            report(program, &error);
            Exit::Error.into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn an_error_is_one_line_naming_the_program_and_the_chain() {
        let error = Err::<(), _>(anyhow::anyhow!("port 80 refused"))
            .context("connecting")
            .unwrap_err();
        assert_eq!(
            error_line("prober", &error),
            "error: prober: connecting: port 80 refused"
        );
    }

    #[test]
    fn bad_input_is_found_under_context() {
        let error = Err::<(), _>(bad_input("unknown flag \"--x\""))
            .context("reading the command line")
            .unwrap_err();
        assert!(is_bad_input(&error));
        assert!(!is_bad_input(&anyhow::anyhow!("the run failed")));
    }

    #[test]
    fn codes_are_named_once() {
        assert_eq!(
            [Exit::Success, Exit::Failed, Exit::Error].map(Exit::code),
            [0, 1, 2]
        );
        assert_eq!(Exit::passed_on(Some(1)), ExitCode::from(1));
        assert_eq!(Exit::passed_on(None), ExitCode::from(Exit::Error));
        assert_eq!(Exit::passed_on(Some(300)), ExitCode::from(Exit::Error));
    }
}
