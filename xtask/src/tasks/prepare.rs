//! `cargo xtask prepare [--bundle DIR]`: what a workshop attendee runs the
//! day before. It makes the toolchain whole (installing a missing wasm
//! target), builds the exercises, runs every lab once in quick mode, draws
//! the charts, builds the widgets and the book, and ends with one line:
//! `ready`, or `not ready:` and exactly what failed. Chromium is only for the
//! tests, so its absence is said but does not stop the workshop. With
//! `--bundle DIR` it also writes an offline bundle (`cargo vendor` and the
//! config that points cargo at it) for a room with poor network.

use std::{fs, path::Path};

use anyhow::{Context, Result, bail};

use crate::{
    book::{self, BookCommand, BookData, Rerun},
    exercise,
    project::Project,
    steps::{self, Steps},
    toolchain,
};

pub fn run(project: &Project, bundle: Option<&Path>) -> Result<()> {
    let mut steps = Steps::new("prepare");
    let mut missing: Vec<String> = Vec::new();
    let mut step = |steps: &mut Steps, name: &str, work: &mut dyn FnMut() -> Result<()>| {
        if let Err(error) = steps.run(name, work) {
            missing.push(format!("{name}: {}", steps::first_line(&error)));
        }
    };
    step(
        &mut steps,
        "the toolchain rust-toolchain.toml pins",
        &mut || toolchain::ensure(project),
    );
    step(&mut steps, "build the exercises (release)", &mut || {
        exercise::build_all(project)
    });
    step(
        &mut steps,
        "run every lab once, draw the charts, build the widgets and the book",
        &mut || {
            book::runs::build(
                project,
                &BookCommand {
                    data: BookData::FreshRuns,
                    mode: lab_kit::Mode::Quick,
                    rerun: Rerun::Changed,
                },
            )
            .map(|_| ())
        },
    );
    if let Some(dir) = bundle {
        step(&mut steps, "write the offline bundle", &mut || {
            write_bundle(project, dir)
        });
    }
    steps.print_report();
    let browser = crate::browser::locate().err();
    if let Some(error) = &browser {
        eprintln!(
            "note: {} (only `cargo xtask test` uses the browser; the workshop does not)",
            steps::first_line(error)
        );
    }
    if !missing.is_empty() {
        bail!("not ready: {}", missing.join("; "));
    }
    match browser {
        None => println!("ready"),
        Some(_) => println!("ready (for the workshop; the browser checks need Chromium)"),
    }
    Ok(())
}

/// `cargo vendor` into DIR/vendor, and DIR/config.toml: the lines to put in
/// the checkout's `.cargo/config.toml` so cargo builds from the bundle.
fn write_bundle(project: &Project, dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let vendor = dir.join("vendor");
    let output = project
        .cargo()
        .args(["vendor", "--versioned-dirs", "--quiet"])
        .arg(&vendor)
        .output()
        .context("running cargo vendor")?;
    if !output.status.success() {
        bail!(
            "cargo vendor failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    // cargo vendor prints the configuration that uses what it wrote.
    let config = String::from_utf8_lossy(&output.stdout).into_owned();
    let config_path = dir.join("config.toml");
    fs::write(&config_path, &config)
        .with_context(|| format!("writing {}", config_path.display()))?;
    eprintln!(
        "    bundle: {} (copy it next to the checkout, then append {} to .cargo/config.toml)",
        vendor.display(),
        config_path.display()
    );
    Ok(())
}
