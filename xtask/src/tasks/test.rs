//! `cargo xtask test`: everything CI checks, every step run even after one
//! fails, so one run shows every failure, and a table of the steps at the end.

use anyhow::{Result, bail};

use crate::{
    book, browser, lab_tests,
    project::Project,
    steps::{self, Steps},
    tidy, toolchain,
};

/// Everything CI checks. Every step runs, so one run shows every failure.
pub fn run(project: &Project) -> Result<()> {
    toolchain::ensure(project)?;
    let mut steps = Steps::new("test");
    let cargo_step = |arguments: &[&str]| -> Result<()> {
        let status = steps::status_with_heartbeat(
            project.cargo().args(arguments),
            &format!("cargo {}", arguments[0]),
        )?;
        if status.success() {
            Ok(())
        } else {
            bail!("cargo {} failed ({status})", arguments.join(" "))
        }
    };
    let _ = steps.run("cargo fmt --check", || {
        cargo_step(&["fmt", "--all", "--check"])
    });
    // Two passes, each in the profile and with the package set of a build
    // that already ran, so clippy reuses its proc macros and build-script
    // outputs instead of compiling them again: the labs, exercises and
    // widgets in release (the book's build), the xtask in its own profile (the
    // one `cargo xtask` was built in). One pass over the whole workspace in
    // release compiled 37 host crates of the xtask's (mdBook's pest, syn and
    // serde with its features) again.
    let _ = steps.run("cargo clippy", || {
        cargo_step(&[
            "clippy",
            "--release",
            "--workspace",
            "--exclude",
            "xtask",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ])?;
        cargo_step(&[
            "clippy",
            "--profile",
            "xtask",
            "--package",
            "xtask",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ])
    });
    // The labs' tests in release: the very artifacts `cargo xtask book` built
    // (see README, "How long it takes"). The xtask runs the binaries itself,
    // the timer-bound labs' side by side and the others alone, like the labs'
    // own runs (see `lab_tests`).
    let _ = steps.run("lab tests (release)", || lab_tests::run(project));
    // The exercises' checks from the same build: each must fail as shipped
    // and pass with its solution (one run each way), scheduled like the lab
    // tests: a lane per timer-bound lab side by side, the others alone, since
    // each check measures time on this machine.
    let _ = steps.run("exercises: fail as shipped, pass solved", || {
        super::exercise_checks::run(project)
    });
    let _ = steps.run("cargo test (xtask)", || {
        cargo_step(&[
            "test",
            "--profile",
            "xtask",
            "--package",
            "xtask",
            "--",
            "--quiet",
        ])
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
