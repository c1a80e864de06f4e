//! What every exercise shares. An exercise is a crate under `exercises/`:
//!
//! - `src/lib.rs` is the reader's file: a real piece of a service or a client
//!   with the chapter's bug in it and a `// TODO` where the reader works;
//! - `solution/lib.rs` is the same piece, fixed;
//! - `src/main.rs` is the check: it builds the piece (the reader's, or with
//!   `--solution` the fixed one) into a server or a client on 127.0.0.1 and
//!   measures it with the lab's own machinery (the keep-alive probe, the
//!   shutdown probe, the lag prober, the connection counter).
//!
//! [`main`] is the check's `main`: it reads the command line, bounds the
//! check's time, prints one `PASS` or `FAIL` line naming what was measured
//! (and on a failure a hint), and exits 0 (pass), 1 (fail) or 2 (could not
//! check: one `error:` line on stderr, as every binary here says it, through
//! `lab_kit::exit`). `cargo xtask exercise verify <name>` builds and runs it.

use std::{fmt, future::Future, process::ExitCode, slice, time::Duration};

use anyhow::anyhow;
use lab_kit::{
    exit::{self, Exit},
    flags::{Flags, Opt},
};

/// How many times faster than production a check runs its timeouts, so a
/// verdict can say what a lab duration stands for. It displays as the bare
/// factor: `"time compressed {COMPRESSION}x"`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Compression(pub f64);

impl Compression {
    /// Production seconds for a lab duration.
    pub fn production_s(self, lab: Duration) -> f64 {
        self.production_s_of_s(lab.as_secs_f64())
    }

    /// Production seconds for lab seconds.
    pub fn production_s_of_s(self, lab_s: f64) -> f64 {
        lab_s * self.0
    }

    /// Production seconds for lab milliseconds (a measured time, or a
    /// difference of two, which a `Duration` could not hold if negative).
    pub fn production_s_of_ms(self, lab_ms: f64) -> f64 {
        self.production_s_of_s(lab_ms / 1000.0)
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, formatter)
    }
}

/// Which piece the check builds on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// `src/lib.rs`, as the reader left it.
    Yours,
    /// `solution/lib.rs`.
    Solution,
}

impl Variant {
    /// Picks the reader's item or the solution's.
    pub fn pick<T>(self, yours: T, solution: T) -> T {
        match self {
            Variant::Yours => yours,
            Variant::Solution => solution,
        }
    }

    fn flag(self) -> Option<&'static str> {
        match self {
            Variant::Yours => None,
            Variant::Solution => Some(SOLUTION.name),
        }
    }
}

/// Calls the reader's async function or the solution's, by the variant:
/// `pick_async!(variant, piece::serve(listener, app), solution::serve(listener, app))`
/// is the future of the one call picked (only that call's arguments are
/// evaluated). The two futures are of different types, so [`Variant::pick`]
/// cannot choose between the functions; this chooses between the calls.
#[macro_export]
macro_rules! pick_async {
    ($variant:expr, $yours:expr, $solution:expr $(,)?) => {
        match $variant {
            $crate::Variant::Yours => $crate::Picked::Yours($yours),
            $crate::Variant::Solution => $crate::Picked::Solution($solution),
        }
        .run()
    };
}

/// The reader's future or the solution's, as one type (see [`pick_async!`]).
pub enum Picked<Y, S> {
    Yours(Y),
    Solution(S),
}

impl<T, Y, S> Picked<Y, S>
where
    Y: Future<Output = T>,
    S: Future<Output = T>,
{
    /// Awaits the one that was picked.
    pub async fn run(self) -> T {
        match self {
            Picked::Yours(yours) => yours.await,
            Picked::Solution(solution) => solution.await,
        }
    }
}

/// What a check found: whether the piece does what the chapter asks, and the
/// measurement that says so, as one sentence.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub passed: bool,
    pub measured: String,
}

impl Verdict {
    pub fn pass(measured: impl Into<String>) -> Verdict {
        Verdict {
            passed: true,
            measured: measured.into(),
        }
    }

    pub fn fail(measured: impl Into<String>) -> Verdict {
        Verdict {
            passed: false,
            measured: measured.into(),
        }
    }

    /// Passes when `holds`, with the sentence for either case.
    pub fn when(holds: bool, measured: impl Into<String>) -> Verdict {
        Verdict {
            passed: holds,
            measured: measured.into(),
        }
    }
}

/// An exercise's name (its package), the hint printed when it fails, and
/// the longest its check may take.
#[derive(Debug, Clone, Copy)]
pub struct Exercise {
    pub name: &'static str,
    pub hint: &'static str,
    pub bound: Duration,
}

impl Exercise {
    /// An exercise whose check takes at most 30 s. A check declares its own
    /// with [`exercise!`], which names it after its package.
    pub const fn new(name: &'static str, hint: &'static str) -> Exercise {
        Exercise {
            name,
            hint,
            bound: Duration::from_secs(30),
        }
    }
}

/// Declares what makes a check's crate an exercise, at the top of its
/// `src/main.rs`: `mod solution` (the crate's `solution/lib.rs`, compiled in
/// beside the reader's piece, so both variants are in one binary) and
/// `const EXERCISE`, named after the crate's package (the name is written
/// once, in `Cargo.toml`) with the hint a failure prints.
#[macro_export]
macro_rules! exercise {
    ($hint:expr $(,)?) => {
        #[path = "../solution/lib.rs"]
        mod solution;

        const EXERCISE: $crate::Exercise = $crate::Exercise::new(env!("CARGO_PKG_NAME"), $hint);
    };
}

/// How the check's binary was started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// `[--solution]`: run the check.
    Verify(Variant),
    /// `__serve [--solution] ARGS...`: be the server under test (for checks
    /// that need it as a process of its own, to signal it).
    Serve(Variant, Vec<String>),
}

const SERVE: &str = "__serve";
const SOLUTION: Opt = Opt::switch("--solution", "check the solution instead of your code");

/// Reads the command line (without the program name) with the kit's one
/// parser; the words after `__serve [--solution]` are the server's own.
pub fn parse(arguments: &[String]) -> anyhow::Result<Invocation> {
    if let Some((first, rest)) = arguments.split_first()
        && first == SERVE
    {
        return Ok(match rest.split_first() {
            Some((first, rest)) if first == SOLUTION.name => {
                Invocation::Serve(Variant::Solution, rest.to_vec())
            }
            _ => Invocation::Serve(Variant::Yours, rest.to_vec()),
        });
    }
    let mut variant = Variant::Yours;
    let mut flags = Flags::new(arguments).declared(slice::from_ref(&SOLUTION));
    while let Some(flag) = flags.next_flag()? {
        match flag.name {
            "--solution" => variant = Variant::Solution,
            _ => return Err(flag.unknown()),
        }
    }
    Ok(Invocation::Verify(variant))
}

/// The command line that starts this binary as the server under test, with
/// `arguments` after it: what a check hands to a probe that starts and
/// signals a server (the shutdown probe).
pub fn serve_command(variant: Variant, arguments: &[&str]) -> anyhow::Result<Vec<String>> {
    let exe = std::env::current_exe()?;
    let mut command = vec![exe.display().to_string(), SERVE.to_string()];
    command.extend(variant.flag().map(str::to_string));
    command.extend(arguments.iter().map(|argument| argument.to_string()));
    Ok(command)
}

/// The `main` of a check that needs no server process of its own.
pub fn main<C, Fut>(exercise: Exercise, check: C) -> ExitCode
where
    C: FnOnce(Variant) -> Fut,
    Fut: Future<Output = anyhow::Result<Verdict>>,
{
    main_with_server(exercise, check, |_, _| async {
        anyhow::bail!("this exercise has no server mode")
    })
}

/// The `main` of a check that also starts this binary as the server under
/// test (see [`serve_command`]); `serve` runs the server until it ends.
pub fn main_with_server<C, Fut, S, SFut>(exercise: Exercise, check: C, serve: S) -> ExitCode
where
    C: FnOnce(Variant) -> Fut,
    Fut: Future<Output = anyhow::Result<Verdict>>,
    S: FnOnce(Variant, Vec<String>) -> SFut,
    SFut: Future<Output = anyhow::Result<()>>,
{
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let name = exercise.name;
    let invocation = match parse(&arguments) {
        Ok(invocation) => invocation,
        Err(problem) => return exit::exit_code(name, Err(problem)),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            let error = anyhow!(error).context("could not start the runtime");
            return exit::exit_code(name, Err(error));
        }
    };
    let code = match invocation {
        Invocation::Serve(variant, rest) => exit::exit_code(
            &format!("{name} (server)"),
            runtime.block_on(serve(variant, rest)),
        ),
        Invocation::Verify(variant) => {
            let which = match variant {
                Variant::Yours => "your code",
                Variant::Solution => "the solution",
            };
            eprintln!("{name}: checking {which}");
            watchdog(exercise);
            let bound = exercise.bound;
            let outcome =
                runtime.block_on(async move { tokio::time::timeout(bound, check(variant)).await });
            report(exercise, outcome)
        }
    };
    // A server or a stray connection task must not keep the check alive.
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

/// The check's timeout runs on the runtime; a piece that blocks every worker
/// (an endless loop in a handler) would stop it from firing. This thread
/// ends the process a little after the bound whatever the runtime does.
fn watchdog(exercise: Exercise) {
    let late = exercise.bound + Duration::from_secs(3);
    std::thread::spawn(move || {
        std::thread::sleep(late);
        let error = anyhow!(
            "could not check: the check did not finish within {} s (is something blocking every runtime thread?)",
            exercise.bound.as_secs()
        );
        exit::report(exercise.name, &error);
        std::process::exit(Exit::Error.code().into());
    });
}

fn report(
    exercise: Exercise,
    outcome: Result<anyhow::Result<Verdict>, tokio::time::error::Elapsed>,
) -> ExitCode {
    let name = exercise.name;
    match outcome {
        Ok(Ok(verdict)) if verdict.passed => {
            println!("{name}: PASS: {}", verdict.measured);
            ExitCode::SUCCESS
        }
        Ok(Ok(verdict)) => {
            println!("{name}: FAIL: {}", verdict.measured);
            println!("hint: {}", exercise.hint);
            Exit::Failed.into()
        }
        Ok(Err(error)) => exit::exit_code(name, Err(error.context("could not check"))),
        Err(_) => {
            let error = anyhow!(
                "could not check: the check did not finish within {} s",
                exercise.bound.as_secs()
            );
            exit::exit_code(name, Err(error))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn the_command_line_picks_the_variant_and_the_mode() {
        let parse = |line: &str| parse(&words(line)).unwrap();
        assert_eq!(parse(""), Invocation::Verify(Variant::Yours));
        assert_eq!(parse("--solution"), Invocation::Verify(Variant::Solution));
        assert_eq!(
            parse("__serve --solution --port 7"),
            Invocation::Serve(Variant::Solution, words("--port 7"))
        );
        assert_eq!(
            parse("__serve --port 7"),
            Invocation::Serve(Variant::Yours, words("--port 7"))
        );
        for (line, says) in [
            ("--fast", "unknown flag \"--fast\""),
            ("solution", "unexpected argument \"solution\""),
        ] {
            let error = super::parse(&words(line)).unwrap_err().to_string();
            assert!(error.contains(says), "{line}: {error}");
        }
    }

    #[test]
    fn pick_takes_the_readers_item_or_the_solutions() {
        assert_eq!(Variant::Yours.pick(1, 2), 1);
        assert_eq!(Variant::Solution.pick(1, 2), 2);
    }

    #[test]
    fn pick_async_calls_only_the_picked_function() {
        async fn yours(called: &mut Vec<&'static str>) -> u32 {
            called.push("yours");
            1
        }
        async fn solution(called: &mut Vec<&'static str>) -> u32 {
            called.push("solution");
            2
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let mut called = Vec::new();
        for variant in [Variant::Yours, Variant::Solution] {
            let got = runtime.block_on(pick_async!(
                variant,
                yours(&mut called),
                solution(&mut called)
            ));
            assert_eq!(got, variant.pick(1, 2));
        }
        assert_eq!(called, ["yours", "solution"]);
    }
}
