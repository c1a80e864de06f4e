//! `cargo xtask`: the lab book's one build tool. Runs the labs, draws the
//! charts, builds, serves and tests the book. `cargo xtask` alone lists the tasks.

mod book;
mod browser;
mod browser_checks;
mod charts;
mod data;
mod lab_runs;
mod project;
mod reaper;
mod runner;
mod serve;
mod steps;
mod tidy;
mod toolchain;
mod widgets;

use std::{path::PathBuf, process::ExitCode};

use anyhow::{Context, Result, bail};
use lab_kit::Mode;

use project::Project;
use steps::Steps;

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
  test  everything CI checks: cargo fmt --check, clippy -D warnings, every
        test of the labs and the xtask, the book from the reference runs, tidy
        checks, and the built pages in headless Chromium (charts, themes,
        search, widgets)
  tidy  only the tidy checks on the sources: includes, chapters, SUMMARY
        entries, reference runs (and the crate versions they name), charts
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
        "tidy" => {
            flags.allow(&[])?;
            tidy::check_sources(&project)?.into_result()
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
    let mut steps = Steps::new("lab");
    let outcome = lab_runs::run_labs(project, &labs, flags.mode()?, &out_dir, &mut steps);
    steps.print_report();
    outcome
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
        project.fresh_data()
    };
    let mut steps = Steps::new("book");
    let outcome = (|| {
        if !flags.has("--no-run") && !flags.has("--data") {
            let labs = project.labs()?;
            lab_runs::run_labs(project, &labs, flags.mode()?, &data_dir, &mut steps)?;
        }
        book::build(project, &data_dir, &mut steps)
    })();
    steps.print_report();
    outcome
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

/// Everything CI checks. Every step runs, so one run shows every failure.
fn test_task(project: &Project) -> Result<()> {
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
    // In release, like the tests below: clippy then reuses the proc macros and
    // build-script outputs `cargo xtask book` compiled, where the dev profile
    // would compile them again (measured: 116 s instead of 153 s, cold).
    let _ = steps.run("cargo clippy", || {
        cargo_step(&[
            "clippy",
            "--release",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ])
    });
    // The labs' tests in release: the very artifacts `cargo xtask book` built
    // (see README, "How long it takes"); the xtask's in its own profile, the
    // one `cargo xtask` itself was built in.
    let _ = steps.run("cargo test (labs, release)", || {
        cargo_step(&[
            "test",
            "--release",
            "--workspace",
            "--exclude",
            "xtask",
            "--",
            "--quiet",
        ])
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
    if book::build(project, &project.reference_data(), &mut steps).is_ok() {
        let _ = steps.run("tidy: built book", || {
            tidy::check_built_book(&project.book_out())?.into_result()
        });
        let _ = steps.run("browser: book pages", || {
            browser_checks::check_book(&project.book_out())
        });
    }
    steps.print_report();
    if steps.failed() > 0 {
        bail!("{} of {} checks failed", steps.failed(), steps.len());
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
