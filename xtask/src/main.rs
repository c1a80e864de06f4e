//! `cargo xtask`: the lab book's one build tool. Runs the labs, draws the
//! charts, builds, serves and tests the book. `cargo xtask` alone lists the tasks.

mod book;
mod browser;
mod browser_checks;
mod charts;
mod data;
mod project;
mod reaper;
mod runner;
mod serve;
mod tidy;
mod toolchain;
mod widgets;

use std::{
    io::{IsTerminal, Write},
    path::PathBuf,
    process::{Command, ExitCode},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use lab_kit::Mode;

use project::{Lab, Project};

const HELP: &str = "\
cargo xtask <task> [options]

Tasks:
  lab <slug>... | --all [--quick | --full] [--out DIR]
        build the labs in release, run them, validate every record, and write
        DIR/<slug>.jsonl (default book/data, the committed reference runs)
  charts [--data DIR]
        draw every chart from DIR (default book/data) into target/charts
  book [--no-run | --data DIR] [--full]
        run every lab (quick mode unless --full) into target/data, draw the
        charts and build the book into target/book; with --no-run, build from
        the committed reference runs in book/data instead; with --data DIR,
        build from the runs in DIR and the reference runs for the labs DIR
        has no run of (e.g. after `lab <slug> --full --out DIR`)
  serve [--port N] [--no-run | --data DIR]
        build the book as `book` does, then serve it on http://127.0.0.1:N
        (default 3000) until Ctrl-C
  test  everything CI checks: cargo fmt --check, clippy -D warnings,
        cargo test --workspace, the book from the reference runs, tidy checks,
        and the built pages in headless Chromium (charts, themes, search)
  browser
        only the browser checks, on the book already in target/book
  labs  list the labs

Exit codes: 0 success, 1 a task failed, 2 bad usage or input.
";

/// Bad usage: exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

fn main() -> ExitCode {
    reaper::install();
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    match dispatch(&arguments) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            if error.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

fn dispatch(arguments: &[String]) -> Result<()> {
    let project = Project::locate();
    let Some((task, rest)) = arguments.split_first() else {
        print!("{HELP}");
        return Ok(());
    };
    let flags = Flags::parse(rest)?;
    match task.as_str() {
        "lab" => lab_task(&project, &flags),
        "charts" => {
            flags.allow(&["--data"])?;
            let data_dir = flags
                .path("--data")
                .unwrap_or_else(|| project.reference_data());
            let written = charts::draw_all(&project, &data_dir)?;
            println!("{written} SVG files in {}", project.charts_dir().display());
            Ok(())
        }
        "book" => {
            flags.allow(&["--no-run", "--data", "--full"])?;
            toolchain::ensure(&project)?;
            let index = book_task(&project, &flags)?;
            println!("{}", index.display());
            Ok(())
        }
        "serve" => {
            flags.allow(&["--no-run", "--data", "--full", "--port"])?;
            let port = match flags.value("--port") {
                Some(text) => text
                    .parse()
                    .map_err(|_| usage(format!("--port {text:?} is not a port number")))?,
                None => 3000,
            };
            let listener = serve::bind(port)?;
            toolchain::ensure(&project)?;
            book_task(&project, &flags)?;
            println!(
                "serving the book on http://{} (Ctrl-C stops)",
                listener.local_addr()?
            );
            serve::serve_forever(listener, project.book_out())
        }
        "test" => {
            flags.allow(&[])?;
            toolchain::ensure(&project)?;
            test_task(&project)
        }
        "browser" => {
            flags.allow(&[])?;
            browser_checks::check_book(&project.book_out())
        }
        "labs" => {
            for lab in project.labs()? {
                println!("{:<18} {}", lab.slug, lab.title);
            }
            Ok(())
        }
        "-h" | "--help" | "help" => {
            print!("{HELP}");
            Ok(())
        }
        other => Err(usage(format!(
            "unknown task {other:?}; run `cargo xtask` for the list"
        ))),
    }
}

/// Flags and positional words of one task.
struct Flags {
    positional: Vec<String>,
    named: Vec<(String, Option<String>)>,
}

impl Flags {
    const WITH_VALUE: [&'static str; 3] = ["--out", "--data", "--port"];

    fn parse(arguments: &[String]) -> Result<Flags> {
        let mut flags = Flags {
            positional: Vec::new(),
            named: Vec::new(),
        };
        let mut words = arguments.iter();
        while let Some(word) = words.next() {
            if Self::WITH_VALUE.contains(&word.as_str()) {
                let value = words
                    .next()
                    .ok_or_else(|| usage(format!("{word} needs a value")))?;
                flags.named.push((word.clone(), Some(value.clone())));
            } else if word.starts_with("--") {
                flags.named.push((word.clone(), None));
            } else {
                flags.positional.push(word.clone());
            }
        }
        Ok(flags)
    }

    fn allow(&self, known: &[&str]) -> Result<()> {
        for (name, _) in &self.named {
            if !known.contains(&name.as_str()) {
                return Err(usage(format!(
                    "unknown option {name}; run `cargo xtask` for the list"
                )));
            }
        }
        if let Some(word) = self.positional.first() {
            return Err(usage(format!("unexpected argument {word:?}")));
        }
        Ok(())
    }

    fn has(&self, name: &str) -> bool {
        self.named.iter().any(|(flag, _)| flag == name)
    }

    fn value(&self, name: &str) -> Option<&str> {
        self.named
            .iter()
            .find(|(flag, _)| flag == name)
            .and_then(|(_, value)| value.as_deref())
    }

    fn path(&self, name: &str) -> Option<PathBuf> {
        self.value(name).map(PathBuf::from)
    }

    fn mode(&self) -> Result<Mode> {
        match (self.has("--quick"), self.has("--full")) {
            (true, true) => Err(usage("choose one of --quick and --full")),
            (_, true) => Ok(Mode::Full),
            _ => Ok(Mode::Quick),
        }
    }
}

fn lab_task(project: &Project, flags: &Flags) -> Result<()> {
    for (name, _) in &flags.named {
        if !["--all", "--quick", "--full", "--out"].contains(&name.as_str()) {
            return Err(usage(format!(
                "unknown option {name}; run `cargo xtask` for the list"
            )));
        }
    }
    let labs = if flags.has("--all") {
        if !flags.positional.is_empty() {
            return Err(usage("name labs or give --all, not both"));
        }
        project.labs()?
    } else {
        project.select_labs(&flags.positional)?
    };
    if labs.is_empty() {
        let known: Vec<String> = project.labs()?.into_iter().map(|lab| lab.slug).collect();
        return Err(usage(format!(
            "name a lab or give --all; the labs are: {}",
            known.join(", ")
        )));
    }
    let out_dir = flags
        .path("--out")
        .unwrap_or_else(|| project.reference_data());
    run_labs(project, &labs, flags.mode()?, &out_dir)
}

fn book_task(project: &Project, flags: &Flags) -> Result<PathBuf> {
    if flags.has("--no-run") && flags.has("--data") {
        return Err(usage("--no-run and --data each choose the data; give one"));
    }
    let data_dir = if flags.has("--no-run") {
        project.reference_data()
    } else if let Some(own) = flags.path("--data") {
        overlay_runs(project, &own)?
    } else {
        let data_dir = project.fresh_data();
        run_labs(project, &project.labs()?, flags.mode()?, &data_dir)?;
        data_dir
    };
    book::build(project, &data_dir)
}

/// The reader's runs in `own` laid over the reference runs, in
/// target/data-overlay: one file per lab, the reader's where there is one.
/// Each file is checked as it is copied, so a corrupt run is named here.
fn overlay_runs(project: &Project, own: &std::path::Path) -> Result<PathBuf> {
    if !own.is_dir() {
        return Err(usage(format!(
            "--data {}: no such directory",
            own.display()
        )));
    }
    let merged = project.root.join("target/data-overlay");
    if merged.exists() {
        std::fs::remove_dir_all(&merged)
            .with_context(|| format!("clearing {}", merged.display()))?;
    }
    std::fs::create_dir_all(&merged).with_context(|| format!("creating {}", merged.display()))?;
    let mut yours = Vec::new();
    for lab in project.labs()? {
        let name = format!("{}.jsonl", lab.slug);
        let from = if own.join(&name).is_file() {
            yours.push(lab.slug.clone());
            own.join(&name)
        } else {
            project.reference_data().join(&name)
        };
        if !from.is_file() {
            continue;
        }
        data::RunData::load(&from)?;
        std::fs::copy(&from, merged.join(&name))
            .with_context(|| format!("copying {}", from.display()))?;
    }
    if yours.is_empty() {
        return Err(usage(format!(
            "--data {}: no <lab>.jsonl run in it (make one with `cargo xtask lab <slug> --out {}`)",
            own.display(),
            own.display()
        )));
    }
    eprintln!(
        "book: your runs of {}; reference runs for the rest",
        yours.join(", ")
    );
    Ok(merged)
}

/// One row of the timing report.
struct LabReport {
    slug: String,
    mode: Mode,
    duration: Duration,
    records: usize,
    outcome: Result<()>,
}

/// Builds the labs in release, runs each with a progress line, prints the
/// timing table, and fails if any lab failed (naming each, with its stderr).
fn run_labs(project: &Project, labs: &[Lab], mode: Mode, out_dir: &std::path::Path) -> Result<()> {
    let mut build = project.cargo();
    build.args(["build", "--release"]);
    for lab in labs {
        build.args(["--package", &lab.package]);
    }
    eprintln!("building {} lab(s) in release", labs.len());
    let status = build.status().context("running cargo build")?;
    if !status.success() {
        bail!("building the labs failed ({status})");
    }
    let binaries = project.cargo_target().join("release");
    let mut reports = Vec::new();
    let interactive = std::io::stderr().is_terminal();
    for (index, lab) in labs.iter().enumerate() {
        let budget = lab.budget(mode);
        let label = format!(
            "[{}/{}] {} ({mode}, budget {}s)",
            index + 1,
            labs.len(),
            lab.slug,
            budget.as_secs()
        );
        eprintln!("{label}");
        let mut command = Command::new(binaries.join(&lab.package));
        command.arg(format!("--{mode}")).current_dir(&project.root);
        let started = Instant::now();
        let destination = out_dir.join(format!("{}.jsonl", lab.slug));
        // The lab stops itself at its budget; the kill timer is the backstop.
        let kill_after = budget + Duration::from_secs(5);
        let result =
            runner::run_lab_command(command, &lab.slug, kill_after, &destination, |line| {
                if interactive {
                    let shown: String = line.chars().take(90).collect();
                    eprint!(
                        "\r\x1b[2K  {:>5.1}s  {shown}",
                        started.elapsed().as_secs_f64()
                    );
                    let _ = std::io::stderr().flush();
                }
            });
        if interactive {
            eprint!("\r\x1b[2K");
        }
        let duration = started.elapsed();
        let (records, outcome) = match result {
            Ok(output) => (output.records, Ok(())),
            Err(error) => (0, Err(error)),
        };
        match &outcome {
            Ok(()) => eprintln!(
                "  done in {:.1}s, {records} records -> {}",
                duration.as_secs_f64(),
                destination.display()
            ),
            Err(error) => eprintln!("  FAILED after {:.1}s: {error:#}", duration.as_secs_f64()),
        }
        reports.push(LabReport {
            slug: lab.slug.clone(),
            mode,
            duration,
            records,
            outcome,
        });
    }
    print_table(&reports);
    let failed: Vec<String> = reports
        .iter()
        .filter_map(|report| {
            // The full error was printed when the lab failed; here, one line each.
            let error = report.outcome.as_ref().err()?;
            let text = format!("{error:#}");
            Some(format!(
                "  {}: {}",
                report.slug,
                text.lines().next().unwrap_or_default()
            ))
        })
        .collect();
    if !failed.is_empty() {
        bail!(
            "{} of {} lab(s) failed; their previous data files are unchanged:\n{}",
            failed.len(),
            reports.len(),
            failed.join("\n")
        );
    }
    Ok(())
}

fn print_table(reports: &[LabReport]) {
    println!(
        "{:<18} {:<6} {:>10} {:>8}  outcome",
        "lab", "mode", "duration", "records"
    );
    for report in reports {
        let outcome = if report.outcome.is_ok() {
            "ok"
        } else {
            "FAILED"
        };
        println!(
            "{:<18} {:<6} {:>9.1}s {:>8}  {outcome}",
            report.slug,
            report.mode.to_string(),
            report.duration.as_secs_f64(),
            report.records
        );
    }
}

/// Everything CI checks. Every step runs, so one run shows every failure.
fn test_task(project: &Project) -> Result<()> {
    let mut steps: Vec<(&str, Duration, Result<()>)> = Vec::new();
    let mut step = |name: &'static str, work: &mut dyn FnMut() -> Result<()>| {
        eprintln!("\n== {name}");
        let started = Instant::now();
        let outcome = work();
        if let Err(error) = &outcome {
            eprintln!("error: {name}: {error:#}");
        }
        steps.push((name, started.elapsed(), outcome));
    };
    let cargo_step = |arguments: &[&str]| -> Result<()> {
        let status = project
            .cargo()
            .args(arguments)
            .status()
            .context("running cargo")?;
        if status.success() {
            Ok(())
        } else {
            bail!("cargo {} failed ({status})", arguments.join(" "))
        }
    };
    step("cargo fmt --check", &mut || {
        cargo_step(&["fmt", "--all", "--check"])
    });
    step("cargo clippy", &mut || {
        cargo_step(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--quiet",
            "--",
            "-D",
            "warnings",
        ])
    });
    step("cargo test", &mut || {
        cargo_step(&["test", "--workspace", "--quiet"])
    });
    step("tidy: sources", &mut || {
        tidy::check_sources(project)?.into_result()
    });
    let mut built = false;
    step("book from reference runs", &mut || {
        let index = book::build(project, &project.reference_data())?;
        built = index.exists();
        if built {
            Ok(())
        } else {
            bail!("{} was not written", index.display())
        }
    });
    if built {
        step("tidy: built book", &mut || {
            tidy::check_built_book(&project.book_out())?.into_result()
        });
        step("browser: book pages", &mut || {
            browser_checks::check_book(&project.book_out())
        });
    }
    eprintln!("\n{:<28} {:>9}  outcome", "step", "duration");
    let mut failed = 0;
    for (name, duration, outcome) in &steps {
        let verdict = if outcome.is_ok() { "ok" } else { "FAILED" };
        failed += usize::from(outcome.is_err());
        eprintln!("{name:<28} {:>8.1}s  {verdict}", duration.as_secs_f64());
    }
    if failed > 0 {
        bail!("{failed} of {} checks failed", steps.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const META: &str = r#"{"type":"meta","data":{"lab":"LAB","mode":"MODE","started":"2026-11-29T18:00:00Z","time_scale":1.0,"params":{},"machine":{"cpu":"Test CPU","cores":2,"os":"linux","kernel":"6.1","rustc":"rustc 1","crates":{}}}}"#;

    fn run_file(lab: &str, mode: &str) -> String {
        let meta = META.replace("LAB", lab).replace("MODE", mode);
        format!(
            "{meta}\n{{\"type\":\"summary\",\"data\":{{\"series\":\"a\",\"values\":{{\"n\":1}}}}}}\n"
        )
    }

    /// A project of two labs, `one` and `two`, each with a reference run.
    fn fake_project(root: &std::path::Path) -> Project {
        for slug in ["one", "two"] {
            let dir = root.join("labs").join(slug);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("Cargo.toml"),
                format!(
                    "[package]\nname = \"lab-{slug}\"\n\n[package.metadata.lab]\ntitle = \"{slug}\"\nquick-budget = 5\nfull-budget = 10\n"
                ),
            )
            .unwrap();
        }
        let reference = root.join("book/data");
        std::fs::create_dir_all(&reference).unwrap();
        for slug in ["one", "two"] {
            std::fs::write(
                reference.join(format!("{slug}.jsonl")),
                run_file(slug, "quick"),
            )
            .unwrap();
        }
        Project {
            root: root.to_path_buf(),
        }
    }

    /// A temporary folder removed when the test ends, passed or failed.
    struct TempRoot(PathBuf);

    impl Drop for TempRoot {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_readers_runs_replace_only_their_own_labs_in_the_book() {
        let temp =
            TempRoot(std::env::temp_dir().join(format!("xtask-overlay-{}", std::process::id())));
        let root = temp.0.clone();
        let project = fake_project(&root);
        let own = root.join("mine");
        std::fs::create_dir_all(&own).unwrap();

        // An empty folder is a usage error, not an empty book.
        let empty = format!("{:#}", overlay_runs(&project, &own).unwrap_err());
        assert!(empty.contains("no <lab>.jsonl run in it"), "{empty}");

        std::fs::write(own.join("two.jsonl"), run_file("two", "full")).unwrap();
        let merged = overlay_runs(&project, &own).unwrap();
        let read =
            |slug: &str| std::fs::read_to_string(merged.join(format!("{slug}.jsonl"))).unwrap();
        assert!(
            read("one").contains("\"mode\":\"quick\""),
            "the reference run fills in"
        );
        assert!(
            read("two").contains("\"mode\":\"full\""),
            "the reader's run wins"
        );

        // A corrupt run of the reader's is named, and nothing is built from it.
        std::fs::write(own.join("two.jsonl"), "not json\n").unwrap();
        let corrupt = format!("{:#}", overlay_runs(&project, &own).unwrap_err());
        assert!(corrupt.contains("two.jsonl:1"), "{corrupt}");
    }
}
