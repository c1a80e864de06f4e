//! The book's own consistency checks, run by `cargo xtask test`:
//! every include resolves to text, every lab has a chapter, a SUMMARY entry,
//! a reference run and charts its data can feed, no internal link in the
//! built book is broken, and the code keeps the house rules (a `//!` line
//! atop every file, no test switched off, a chapter shows only its own lab's
//! data, no file over 500 lines, no function over 100 lines, no public type
//! name defined twice in one package), a sentence that compares quoted values
//! is written as a claim, and every library fact the book marks has an entry
//! and a test (or a source).

use std::{
    collections::{BTreeMap, HashSet},
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

use crate::{book::directive::well_formed, charts, data::RunData, project::Project};

mod built;
mod chapter_scope;
mod comparisons;
mod facts;
mod features;
mod file_length;
mod fn_length;
mod import_cycles;
mod includes;
mod learning;
mod paths;
mod type_names;
mod workshops;

pub use built::check_built_book;

/// Every problem found, so one run shows them all.
#[derive(Default)]
pub struct Problems(Vec<String>);

impl Problems {
    pub(crate) fn add(&mut self, problem: String) {
        self.0.push(problem);
    }

    pub fn into_result(self) -> Result<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        anyhow::bail!(
            "{} tidy problem(s):\n  - {}",
            self.0.len(),
            self.0.join("\n  - ")
        )
    }
}

/// Checks on the sources (before the book is built).
pub fn check_sources(project: &Project) -> Result<Problems> {
    let mut problems = Problems::default();
    let book_dir = project.root.join("book");
    let chapters = files_with_extension(&book_dir, "md")?;
    for chapter in &chapters {
        includes::check_includes(chapter, &mut problems)?;
    }
    let mut pages = chapters.clone();
    pages.extend(files_with_extension(&book_dir, "toml")?);
    pages.push(project.root.join("README.md"));
    pages.push(project.root.join("ARCHITECTURE.md"));
    paths::check(&project.root, &pages, &mut problems);
    let summary =
        fs::read_to_string(book_dir.join("SUMMARY.md")).context("reading book/SUMMARY.md")?;
    let mut shown_charts: HashSet<String> = HashSet::new();
    for chapter in &chapters {
        let text = fs::read_to_string(chapter)?;
        for chart in well_formed(&text).filter(|directive| directive.name == "chart") {
            shown_charts.insert(chart.args.to_string());
        }
    }
    // The versions this checkout's labs link (the kit reads them from
    // Cargo.lock when it is built): a reference run must name the same, or
    // its captions say it measured crates it did not.
    let built_with = lab_kit::machine::Machine::collect().crates;
    for lab in project.labs()? {
        let slug = &lab.slug;
        let chapter_name = format!("{slug}.md");
        if !chapters.iter().any(|path| {
            path.file_name()
                .is_some_and(|name| name == chapter_name.as_str())
        }) {
            problems.add(format!("labs/{slug} has no chapter book/{chapter_name}"));
        }
        if !summary.contains(&format!("{chapter_name})")) {
            problems.add(format!("book/SUMMARY.md does not list {chapter_name}"));
        }
        // Every lab's chapter ends with its quiz, and the quiz is well formed.
        let chapter_text = fs::read_to_string(book_dir.join(&chapter_name)).unwrap_or_default();
        let has_quiz = well_formed(&chapter_text)
            .any(|directive| directive.name == "quiz" && directive.args == slug.as_str());
        if !has_quiz {
            problems.add(format!(
                "book/{chapter_name} has no quiz: add {{{{#quiz {slug}}}}} and book/quizzes/{slug}.toml"
            ));
        } else if let Err(error) = crate::book::quiz::load(&book_dir, slug) {
            problems.add(format!("{error:#}"));
        }
        let data_path = project.reference_data().join(format!("{slug}.jsonl"));
        if !data_path.exists() {
            problems.add(format!(
                "labs/{slug} has no reference run book/data/{slug}.jsonl"
            ));
            continue;
        }
        let run = match RunData::load(&data_path) {
            Ok(run) => run,
            Err(error) => {
                problems.add(format!("{error:#}"));
                continue;
            }
        };
        if let Some(problem) = stale_versions(slug, &run.meta.machine.crates, &built_with) {
            problems.add(problem);
        }
        if !run.meta.set.is_empty() {
            problems.add(format!(
                "book/data/{slug}.jsonl was run with --set {}: a reference run keeps the lab's own settings",
                run.meta.set.join(" --set ")
            ));
        }
        let specs = charts::load_specs(&lab)?;
        for spec in &specs {
            if let Err(error) = spec.prepare(&run) {
                problems.add(format!("chart {slug}/{}: {error:#}", spec.name));
            }
            if !shown_charts.contains(&format!("{slug}/{}", spec.name)) {
                problems.add(format!(
                    "chart {slug}/{} is declared but no chapter shows it",
                    spec.name
                ));
            }
        }
    }
    let slugs: Vec<String> = project.labs()?.into_iter().map(|lab| lab.slug).collect();
    let exercises = crate::exercise::exercises(project)?;
    learning::check(&book_dir, &slugs, &exercises, &mut problems);
    workshops::check(&book_dir, &slugs, &mut problems);
    let sources = rust_sources(project)?;
    check_rust_files(&sources, &mut problems);
    let manifests = member_manifests(project)?;
    check_test_switches(project, &manifests, &mut problems)?;
    features::check_manifests(project, &manifests, &mut problems);
    features::check_package_sets(project, &mut problems)?;
    check_layout(project, &chapters, &sources, &mut problems)?;
    check_comparisons(&book_dir, &mut problems)?;
    facts::check(&project.root, &mut problems)?;
    Ok(problems)
}

/// A reference run recorded with other versions of the HTTP crates than the
/// workspace builds today: one line naming each difference and the fix.
fn stale_versions(
    slug: &str,
    recorded: &BTreeMap<String, String>,
    built_with: &BTreeMap<String, String>,
) -> Option<String> {
    let differences: Vec<String> = built_with
        .iter()
        .filter_map(|(name, version)| match recorded.get(name) {
            Some(old) if old == version => None,
            Some(old) => Some(format!("{name} {old}, the workspace builds {version}")),
            None => Some(format!("no {name}, the workspace builds {version}")),
        })
        .collect();
    (!differences.is_empty()).then(|| {
        format!(
            "book/data/{slug}.jsonl was recorded with other crate versions ({}): re-record it with `cargo xtask lab {slug}`",
            differences.join("; ")
        )
    })
}

/// Every `.rs` file under labs/, exercises/, facts/, xtask/ and widgets/:
/// (path from the workspace root, text).
fn rust_sources(project: &Project) -> Result<Vec<(String, String)>> {
    let mut sources = Vec::new();
    for folder in ["labs", "exercises", "facts", "xtask", "widgets"] {
        let dir = project.root.join(folder);
        if !dir.exists() {
            continue;
        }
        for path in files_with_extension(&dir, "rs")? {
            let text =
                fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            let relative = path.strip_prefix(&project.root).unwrap_or(&path);
            sources.push((relative.display().to_string(), text));
        }
    }
    Ok(sources)
}

/// House rules the compiler does not check: every .rs file starts with a `//!`
/// line; no test is switched off with the ignore attribute (a test that
/// only real time can run checks `lab_kit::REAL_TIME` instead, and `cargo
/// xtask test` runs it in the background).
fn check_rust_files(sources: &[(String, String)], problems: &mut Problems) {
    for (relative, text) in sources {
        if !text.trim_start().starts_with("//!") {
            problems.add(format!(
                "{relative} does not open with a //! line saying what it is for"
            ));
        }
        let attribute = concat!("#[", "ignore");
        if text.contains(attribute) {
            problems.add(format!("{relative} switches a test off with {attribute}]: assert today's behaviour and leave a FIXME"));
        }
    }
}

/// The layout rules: every chapter shows only its own lab's data, no Rust
/// file and no function is over its line limit, no public type name is
/// defined twice in one package, no two files of a crate import each other.
fn check_layout(
    project: &Project,
    chapters: &[PathBuf],
    sources: &[(String, String)],
    problems: &mut Problems,
) -> Result<()> {
    let labs: Vec<String> = project.labs()?.into_iter().map(|lab| lab.slug).collect();
    let book_dir = project.root.join("book");
    for chapter in chapters
        .iter()
        .filter(|chapter| chapter.parent() == Some(&book_dir))
    {
        let page = chapter.file_name().unwrap_or_default().to_string_lossy();
        let text = fs::read_to_string(chapter)
            .with_context(|| format!("reading {}", chapter.display()))?;
        chapter_scope::check_page(&page, &text, &labs, problems);
    }
    for (relative, text) in sources {
        file_length::check_file(relative, text, problems);
        fn_length::check_file(relative, text, problems);
    }
    type_names::check(sources, problems);
    import_cycles::check(sources, problems);
    Ok(())
}

/// Every sentence of a page, its interview and notes pages and its quiz that
/// compares quoted values is a claim.
fn check_comparisons(book_dir: &Path, problems: &mut Problems) -> Result<()> {
    let mut pages = Vec::new();
    for (folder, extension) in [
        ("", "md"),
        ("interviews", "md"),
        ("notes", "md"),
        ("quizzes", "toml"),
    ] {
        let dir = book_dir.join(folder);
        pages.extend(
            files_with_extension(&dir, extension)?
                .into_iter()
                .filter(|page| page.parent() == Some(dir.as_path())),
        );
    }
    for page in pages {
        let text =
            fs::read_to_string(&page).with_context(|| format!("reading {}", page.display()))?;
        let name = page.strip_prefix(book_dir).unwrap_or(&page);
        comparisons::check_page(&name.display().to_string(), &text, problems);
    }
    Ok(())
}

/// A member's Cargo.toml: where it is, and what it says.
type Manifest = (std::path::PathBuf, toml::Table);

/// Every member's manifest (labs, exercises, widgets, the facts, the xtask),
/// parsed.
fn member_manifests(project: &Project) -> Result<Vec<Manifest>> {
    let mut manifests = Vec::new();
    let xtask = project.root.join("xtask/Cargo.toml");
    let table: toml::Table = fs::read_to_string(&xtask)?
        .parse()
        .with_context(|| format!("parsing {}", xtask.display()))?;
    manifests.push((xtask, table));
    let facts = project.root.join("facts/Cargo.toml");
    if facts.exists() {
        let table: toml::Table = fs::read_to_string(&facts)?
            .parse()
            .with_context(|| format!("parsing {}", facts.display()))?;
        manifests.push((facts, table));
    }
    for folder in ["labs", "exercises", "widgets"] {
        for entry in fs::read_dir(project.root.join(folder))? {
            let manifest = entry?.path().join("Cargo.toml");
            if !manifest.exists() {
                continue;
            }
            let table: toml::Table = fs::read_to_string(&manifest)?
                .parse()
                .with_context(|| format!("parsing {}", manifest.display()))?;
            manifests.push((manifest, table));
        }
    }
    Ok(manifests)
}

/// A target with `test = false` in its manifest (a lab's thin `main.rs`, a
/// library whose tests live in tests/) must hold no test, or `cargo test`
/// would skip it without a word.
fn check_test_switches(
    project: &Project,
    manifests: &[Manifest],
    problems: &mut Problems,
) -> Result<()> {
    for (manifest, table) in manifests {
        let dir = manifest.parent().unwrap_or(&project.root);
        let mut switched_off = Vec::new();
        if let Some(lib) = table.get("lib").and_then(|lib| lib.as_table())
            && lib.get("test").and_then(|test| test.as_bool()) == Some(false)
        {
            // A library's tests may sit in any of its modules.
            let main = dir.join("src/main.rs");
            let files = files_with_extension(&dir.join("src"), "rs")?;
            switched_off.extend(files.into_iter().filter(|file| *file != main));
        }
        for bin in table
            .get("bin")
            .and_then(|bins| bins.as_array())
            .into_iter()
            .flatten()
            .filter_map(|bin| bin.as_table())
            .filter(|bin| bin.get("test").and_then(|test| test.as_bool()) == Some(false))
        {
            let path = bin
                .get("path")
                .and_then(|path| path.as_str())
                .unwrap_or("src/main.rs");
            switched_off.push(dir.join(path));
        }
        for file in switched_off {
            let source =
                fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            if holds_a_test(&source) {
                let relative = file.strip_prefix(&project.root).unwrap_or(&file);
                problems.add(format!(
                    "{} holds a test, but its target says test = false in {}: cargo test would skip it",
                    relative.display(),
                    manifest.strip_prefix(&project.root).unwrap_or(manifest).display()
                ));
            }
        }
    }
    Ok(())
}

/// A test function or a test module: `#[test]`, `#[tokio::test]`, `#[cfg(test)]`.
fn holds_a_test(source: &str) -> bool {
    source.lines().map(str::trim_start).any(|line| {
        line.starts_with("#[")
            && (line.contains("test]") || line.contains("::test(") || line.contains("cfg(test"))
    })
}

/// Every file under `dir` with the extension, skipping target folders.
pub fn files_with_extension(dir: &Path, extension: &str) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in
            fs::read_dir(&current).with_context(|| format!("reading {}", current.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                if path
                    .file_name()
                    .is_some_and(|name| name == "target" || name == "node_modules")
                {
                    continue;
                }
                pending.push(path);
            } else if path.extension().is_some_and(|found| found == extension) {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_run_must_name_the_versions_the_workspace_builds() {
        let versions = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(name, version)| (name.to_string(), version.to_string()))
                .collect()
        };
        let today = versions(&[("hyper", "1.12.0"), ("tower-http", "0.7.1")]);
        assert_eq!(stale_versions("demo", &today, &today), None);
        let problem = stale_versions(
            "demo",
            &versions(&[("hyper", "1.12.0"), ("tower-http", "0.6.11")]),
            &today,
        )
        .expect("a stale version is a problem");
        assert!(
            problem.contains("tower-http 0.6.11, the workspace builds 0.7.1")
                && problem.contains("cargo xtask lab demo"),
            "{problem}"
        );
        let problem = stale_versions("demo", &versions(&[("hyper", "1.12.0")]), &today)
            .expect("a missing crate is a problem");
        assert!(problem.contains("no tower-http"), "{problem}");
        // Crates the workspace no longer tracks do not matter.
        let extra = versions(&[("hyper", "1.12.0"), ("tower-http", "0.7.1"), ("h2", "0.4")]);
        assert_eq!(stale_versions("demo", &extra, &today), None);
    }

    /// The same checks `cargo xtask tidy` runs, so a plain `cargo test` sees
    /// a missing chapter or a stale reference run too.
    #[test]
    fn this_checkout_is_tidy() {
        let problems = check_sources(&Project::locate()).expect("the checks run");
        if let Err(error) = problems.into_result() {
            panic!("{error:#}");
        }
    }

    #[test]
    fn tests_are_found_in_any_of_their_forms() {
        assert!(holds_a_test("#[test]\nfn a() {}"));
        assert!(holds_a_test("    #[tokio::test]\n    async fn a() {}"));
        assert!(holds_a_test("#[tokio::test(flavor = \"multi_thread\")]"));
        assert!(holds_a_test("#[cfg(test)]\nmod tests {}"));
        assert!(!holds_a_test(
            "//! a lab\nfn main() { run(); }\n// not a #[test] here"
        ));
    }
}
