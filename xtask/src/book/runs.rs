//! The book built from the runs a command chooses (`cargo xtask book`,
//! `serve` and `prepare`): the labs run now (or the reference runs, or a
//! reader's own runs laid over them), then the charts, the widgets and the
//! book.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use lab_kit::{Mode, exit::bad_input};

use crate::{
    book, book::directive::data_directives, data, project::Project, release, reuse, runner,
    steps::Steps,
};

/// `cargo xtask book` (and `serve`): where the book's data comes from.
#[derive(Debug, PartialEq)]
pub struct BookCommand {
    pub data: BookData,
    pub mode: Mode,
    /// Which labs run again though their last run stands (`--rerun`).
    pub rerun: Rerun,
}

/// `--rerun`: none, every lab, or the labs named after it.
#[derive(Debug, Clone, PartialEq)]
pub enum Rerun {
    /// Only the labs whose binary changed, or that have no run yet.
    Changed,
    All,
    Named(Vec<String>),
}

#[derive(Debug, PartialEq)]
pub enum BookData {
    /// Run every lab now, into target/data.
    FreshRuns,
    /// The committed reference runs (`--no-run`).
    Reference,
    /// The reader's runs in a folder, over the reference runs (`--data DIR`).
    Overlay(PathBuf),
    /// Several machines' runs (`--data DIR --data DIR ...`, a workshop): the
    /// chapters show the first, the comparison page all of them.
    Compare(Vec<PathBuf>),
}

/// Builds the book from the data `command` chooses and returns index.html;
/// prints the step table whether it worked or not.
pub fn build(project: &Project, command: &BookCommand) -> Result<PathBuf> {
    let data_dir = match &command.data {
        BookData::Reference => project.reference_data(),
        BookData::Overlay(own) => overlay_runs(project, own)?,
        BookData::Compare(dirs) => overlay_runs(project, &dirs[0])?,
        BookData::FreshRuns => project.fresh_data(),
    };
    let mut steps = Steps::new("book");
    let outcome = (|| {
        let mut data_dir = data_dir;
        if command.data == BookData::FreshRuns {
            let labs = project.labs()?;
            if let Rerun::Named(names) = &command.rerun {
                project.select_labs(names)?;
            }
            steps.run("build the labs (release)", || release::build(project, &[]))?;
            let stale = steps.run("which labs to run", || {
                reuse::labs_to_run(project, &labs, command.mode, &command.rerun, &data_dir)
            })?;
            if !stale.is_empty() {
                runner::run_labs(
                    project,
                    &stale,
                    command.mode,
                    &[],
                    None,
                    &data_dir,
                    &mut steps,
                )?;
            }
            // A run that could not measure a part (no [::1] here, say) has no
            // data for that part's charts: its chapter shows the reference run.
            data_dir = overlay_runs(project, &data_dir)?;
        }
        let compare: &[PathBuf] = match &command.data {
            BookData::Compare(dirs) => dirs,
            _ => &[],
        };
        book::build(project, &data_dir, compare, &mut steps)
    })();
    steps.print_report();
    let built = outcome?;
    // Last, where the reader looks: each chapter whose sentences the runs
    // contradict (the pages mark them too).
    for line in &built.contradicted {
        eprintln!("claims: {line}");
    }
    Ok(built.index)
}

/// The reader's runs in `own` laid over the reference runs, in
/// target/data-overlay: one file per lab, the reader's where there is one.
/// Each file is checked as it is copied, so a corrupt run is named here.
fn overlay_runs(project: &Project, own: &Path) -> Result<PathBuf> {
    if !own.is_dir() {
        return Err(bad_input(format!(
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
        let own_run = own.join(&name);
        let mut from = project.reference_data().join(&name);
        if own_run.is_file() {
            // A run whose settings dropped something a chart or the chapter
            // reads (`--set setup_names=...`) cannot feed that chapter.
            match missing_for_chapter(project, &lab, &data::RunData::load(&own_run)?)? {
                None => {
                    yours.push(lab.slug.clone());
                    from = own_run.clone();
                }
                Some(missing) => eprintln!(
                    "book: your run of {} lacks {missing}; its chapter uses the reference run",
                    lab.slug
                ),
            }
        }
        if !from.is_file() {
            continue;
        }
        if from != own_run {
            // The reader's run was checked above; a reference run is checked here.
            data::RunData::load(&from)?;
        }
        std::fs::copy(&from, merged.join(&name))
            .with_context(|| format!("copying {}", from.display()))?;
    }
    if yours.is_empty() {
        return Err(bad_input(format!(
            "--data {}: no <lab>.jsonl run in it (make one with `cargo xtask lab <slug> --out {}`)",
            own.display(),
            own.display()
        )));
    }
    let all = project.labs()?.len();
    if yours.len() < all {
        eprintln!(
            "book: your runs of {}; reference runs for the rest",
            yours.join(", ")
        );
    }
    Ok(merged)
}

/// What `run` lacks that the lab's charts, chapter or quiz read, if anything.
fn missing_for_chapter(
    project: &Project,
    lab: &crate::project::Lab,
    run: &data::RunData,
) -> Result<Option<String>> {
    for spec in crate::charts::load_specs(lab)? {
        if let Err(error) = spec.prepare(run) {
            return Ok(Some(format!("what chart {} draws ({error:#})", spec.name)));
        }
    }
    let book_dir = project.root.join("book");
    let texts = [
        book_dir.join(format!("{}.md", lab.slug)),
        book_dir.join("quizzes").join(format!("{}.toml", lab.slug)),
    ];
    for path in texts {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        // What a full run's directives read is the committed full run's.
        for quoted in data_directives(&text)
            .into_iter()
            .filter(|quoted| !quoted.full)
        {
            // A value names `<slug> <series> <field>`; a claim `<slug>` and
            // `<series>:<field>` on either side of its relation.
            let directive = &quoted.directive;
            let words: Vec<&str> = directive
                .args
                .split('|')
                .next()
                .unwrap_or_default()
                .split_whitespace()
                .collect();
            let fields: Vec<(&str, &str)> = match (directive.name, words.as_slice()) {
                ("value", [_, series, field]) => vec![(*series, *field)],
                ("claim", [_, operands @ ..]) => operands
                    .iter()
                    .filter_map(|word| word.rsplit_once(':'))
                    .collect(),
                _ => continue,
            };
            for (series, field) in fields {
                let found = run
                    .points(data::PointKind::Summary)
                    .iter()
                    .any(|point| point.series == series && point.values.contains_key(field));
                if quoted.lab == lab.slug && !found {
                    return Ok(Some(format!(
                        "the value {series} {field} that its chapter quotes"
                    )));
                }
            }
        }
    }
    Ok(None)
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
