//! `cargo xtask test`: everything CI checks, every step run even after one
//! fails, so one run shows every failure, and a table of the steps at the end.

use anyhow::{Result, bail};

use crate::{
    book, browser, exercise, lab_tests,
    project::Project,
    steps::{self, Steps},
    tidy, toolchain,
};

/// `-D warnings` as `cargo clippy -- -D warnings` hands it to clippy's
/// driver: each argument followed by the separator the driver splits on.
const CLIPPY_DENY_WARNINGS: &str = "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__";

/// Everything CI checks. Every step runs, so one run shows every failure.
pub fn run(project: &Project) -> Result<()> {
    toolchain::ensure(project)?;
    let mut steps = Steps::new("test");
    // `cargo ARGUMENTS`, with `env` set: Ok when it succeeds.
    let cargo_step = |arguments: &[&str], env: &[(&str, &std::ffi::OsStr)]| -> Result<()> {
        let mut command = project.cargo();
        command.args(arguments).envs(env.iter().copied());
        let status =
            steps::status_with_heartbeat(&mut command, &format!("cargo {}", arguments[0]))?;
        if status.success() {
            Ok(())
        } else {
            bail!("cargo {} failed ({status})", arguments.join(" "))
        }
    };
    let _ = steps.run("cargo fmt --check", || {
        cargo_step(&["fmt", "--all", "--check"], &[])
    });
    // In release, the profile and package set of the book's build, so clippy
    // reuses its proc macros and build-script outputs instead of compiling
    // them again. The xtask is linted below, as its tests build.
    let _ = steps.run("cargo clippy", || {
        cargo_step(
            &[
                "clippy",
                "--release",
                "--workspace",
                "--exclude",
                "xtask",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
            &[],
        )
    });
    // The labs' tests in release: the very artifacts `cargo xtask book` built
    // (see README, "How long it takes"). The xtask runs the binaries itself,
    // the timer-bound labs' side by side and the others alone, like the labs'
    // own runs (see `lab_tests`). The exercises' checks, from the same build,
    // run in those lanes: each must fail as shipped and pass with its solution
    // (one run each way), those that only wait beside the batch of tests, the
    // others alone before the tests that run alone.
    let _ = steps.run("lab tests and exercises (release)", || {
        let built = exercise::build_all(project);
        let checks = match &built {
            Ok(()) => Some(exercise::Checks::new(project)?),
            Err(_) => None,
        };
        let tests = lab_tests::run_beside(project, checks.as_ref());
        let exercises = built.and_then(|()| checks.map_or(Ok(()), exercise::Checks::verdict));
        match (tests, exercises) {
            (Ok(()), Ok(())) => Ok(()),
            (Err(error), Ok(())) | (Ok(()), Err(error)) => Err(error),
            (Err(tests), Err(exercises)) => Err(anyhow::anyhow!("{tests:#}\n{exercises:#}")),
        }
    });
    // The xtask's lints come with its test build: cargo runs clippy's driver
    // as the rustc of the workspace's crates (what `cargo clippy` does), and
    // the dependencies are the ones `cargo xtask` itself was built with.
    // `cargo clippy` would check every one of them again first, mdBook,
    // plotters and wasm-bindgen's CLI library, 20 s on two cores. The test
    // build covers the binary too (the integration test runs it).
    let _ = steps.run("cargo clippy and test (xtask)", || {
        let driver = toolchain::clippy_driver(project)?;
        cargo_step(
            &[
                "test",
                "--profile",
                "xtask",
                "--package",
                "xtask",
                "--",
                "--quiet",
            ],
            &[
                ("RUSTC_WORKSPACE_WRAPPER", driver.as_os_str()),
                ("CLIPPY_ARGS", CLIPPY_DENY_WARNINGS.as_ref()),
            ],
        )
    });
    let _ = steps.run("tidy: sources", || {
        tidy::check_sources(project)?.into_result()
    });
    if book::build(project, &project.reference_data(), &[], &mut steps).is_ok() {
        let _ = steps.run("tidy: built book", || {
            tidy::check_built_book(&project.book_out())?.into_result()
        });
        let _ = steps.run("browser: book pages", || {
            browser::checks::check_book(&project.book_out())
        });
    }
    steps.print_report();
    if steps.failed() > 0 {
        bail!("{} of {} checks failed", steps.failed(), steps.len());
    }
    Ok(())
}
