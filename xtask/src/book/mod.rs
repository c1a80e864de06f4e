//! Building the book: mdBook 0.5 used as a library, after the book's own
//! directives are expanded from the lab data:
//!
//! - `{{#chart <slug>/<name>}}`: a figure with the light and the dark SVG of a
//!   chart and a caption naming the run that fed it;
//! - `{{#table <slug> <sample|summary> <field,...> [series,...]}}`: a table of
//!   records, so numbers in a chapter come from the data, not from prose;
//! - `{{#value <slug> <series> <field>}}`: one field of one summary record,
//!   inline, so a number quoted in a sentence is the number of the run; its
//!   tooltip names the data file, the series and the field;
//! - `{{#claim <slug> <left> <relation> [<factor>x] <right> | <sentence>}}`: a
//!   sentence that compares measured values, checked against the run (see
//!   `claims`): false on the reference runs, the book does not build; false on
//!   a reader's run, the page says so beside the sentence;
//! - in `{{#table}}`, `{{#value}}` and `{{#claim}}`, `<slug>@full` names the
//!   full-mode run the book keeps in `book/data/full/<slug>.jsonl`, for what
//!   a quick run's window cannot show (the servers' minute-long defaults);
//! - `{{#fact <id>}}`: a small marker after a statement about a library's or a
//!   platform's default, linking to its entry in the "How we know" appendix;
//!   `{{#facts}}`: that appendix, every entry of `book/facts.toml` with its
//!   test and the crate version from Cargo.lock, or its source (see `facts`);
//! - `{{#widget <name>}}`: the container and the module script of a widget;
//! - `{{#quiz <slug>}}`: the chapter's questions from `book/quizzes/<slug>.toml`
//!   (see `quiz`).
//! - `{{#duration reading=N lab=N exercises=N quiz=N}}`: a chapter's minutes;
//!   `{{#agenda <name>}}`: a workshop's schedule from `book/workshops/<name>.toml`,
//!   its minutes read from the chapters (see `workshop`);
//!   `{{#notes <slug>}}`: the speaker notes in `book/notes/<slug>.md`, hidden
//!   until the presenter toggle shows them.
//! - `{{#compare}}`: the comparison charts of a book built from several
//!   machines' runs (`--data DIR --data DIR`), or how to build them.
//!
//! A directive preceded by a backslash is left as text (without the backslash).
//!
//! `runs` chooses the runs a build reads (the labs run now, the reference
//! runs, or a reader's runs laid over them) for `book`, `serve` and `prepare`.

mod claims;
pub mod directive;
mod directives;
pub mod facts;
pub mod quiz;
pub mod runs;
mod table;
mod values;
pub mod workshop;

use std::{
    collections::HashMap,
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, anyhow, bail, ensure};

use directives::expand;
use mdbook_driver::{MDBook, book::Chapter};
pub use runs::{BookCommand, BookData, Rerun};

use crate::{
    charts::{self, ChartSpec},
    data::RunData,
    project::Project,
    steps::Steps,
    widgets,
};

/// What the directives read: each lab's chart specs and run data.
pub struct LabData {
    data_dir: PathBuf,
    /// book/, where the quizzes are.
    book_dir: PathBuf,
    specs: HashMap<String, Vec<ChartSpec>>,
    runs: HashMap<String, RunData>,
    /// The committed full-mode runs (`book/data/full/<slug>.jsonl`), read
    /// as `<slug>@full`: for what a quick run's window cannot show. Always
    /// the reference's, whoever's runs the rest of the book shows.
    full_runs: HashMap<String, RunData>,
    widgets: Vec<String>,
    /// A workshop's comparison charts, when the book is built from several
    /// machines' runs; `{{#compare}}` shows them.
    comparisons: Vec<charts::compare::Figure>,
    /// Built from the reference runs: a claim that does not hold is an error.
    enforce_claims: bool,
    /// Built from a reader's runs: the claims they contradict, (slug, claim).
    contradicted: std::cell::RefCell<Vec<(String, String)>>,
    /// `book/facts.toml`, and the version of each crate a fact names.
    facts: Vec<facts::Fact>,
    fact_versions: Vec<(String, String)>,
}

/// What a build made: the book's first page, and the lines that say which
/// claims the reader's runs contradict (none for the reference runs).
pub struct BuiltBook {
    pub index: PathBuf,
    pub contradicted: Vec<String>,
}

impl LabData {
    pub fn load(project: &Project, data_dir: &Path) -> Result<LabData> {
        let mut specs = HashMap::new();
        let mut runs = HashMap::new();
        let mut full_runs = HashMap::new();
        let full_dir = project.reference_data().join(FULL_DIR);
        for lab in project.labs()? {
            specs.insert(lab.slug.clone(), charts::load_specs(&lab)?);
            for (dir, found) in [(data_dir, &mut runs), (&full_dir, &mut full_runs)] {
                let path = dir.join(format!("{}.jsonl", lab.slug));
                if path.exists() {
                    found.insert(lab.slug.clone(), RunData::load(&path)?);
                }
            }
        }
        let widgets = widgets::discover(project)?
            .into_iter()
            .map(|widget| widget.name)
            .collect();
        let book_dir = project.root.join("book");
        let facts = facts::load(&book_dir)?;
        let fact_versions = facts::versions(&project.root, &facts);
        Ok(LabData {
            data_dir: data_dir.to_path_buf(),
            book_dir,
            specs,
            runs,
            full_runs,
            widgets,
            comparisons: Vec::new(),
            enforce_claims: data_dir == project.reference_data(),
            contradicted: Default::default(),
            facts,
            fact_versions,
        })
    }

    /// The run a directive names: `<slug>` (the run the book is built
    /// from) or `<slug>@full` (the committed full run).
    fn run(&self, slug: &str) -> Result<&RunData> {
        let (lab, runs, dir) = match slug.strip_suffix(FULL_SUFFIX) {
            Some(lab) => (lab, &self.full_runs, format!("book/data/{FULL_DIR}")),
            None => (slug, &self.runs, self.data_dir.display().to_string()),
        };
        if !self.specs.contains_key(lab) {
            bail!("no lab named {lab:?}");
        }
        runs.get(lab).ok_or_else(|| match slug.ends_with(FULL_SUFFIX) {
            true => anyhow!(
                "no full run of lab {lab:?} in {dir} (make it with `cargo xtask lab {lab} --full --out {dir}`)"
            ),
            false => anyhow!("no data for lab {lab:?} in {dir}"),
        })
    }
}

/// Where the committed full runs are, under book/data, and how a directive
/// names one (`doctor@full`).
const FULL_DIR: &str = "full";
pub(crate) const FULL_SUFFIX: &str = "@full";

/// The data file of a directive's run, as the built book links it
/// (`lab-data/<file>`): `doctor@full` is `full/doctor.jsonl`.
pub(crate) fn data_file(slug: &str) -> String {
    match slug.strip_suffix(FULL_SUFFIX) {
        Some(lab) => format!("{FULL_DIR}/{lab}.jsonl"),
        None => format!("{slug}.jsonl"),
    }
}

/// Builds the book from `data_dir` into target/book and returns index.html,
/// in three steps: the charts (and, with `compare` folders, each machine's
/// runs on the headline charts), the widgets, the book itself.
pub fn build(
    project: &Project,
    data_dir: &Path,
    compare: &[PathBuf],
    steps: &mut Steps,
) -> Result<BuiltBook> {
    let (written, comparisons) = steps.run("draw the charts", || {
        let written = charts::draw_all(project, data_dir)?;
        eprintln!("    {written} SVG files from {}", data_dir.display());
        let comparisons = if compare.is_empty() {
            Vec::new()
        } else {
            let figures = charts::compare::draw_all(project, compare, &project.charts_dir())?;
            eprintln!(
                "    {} comparison charts of {} machines",
                figures.len(),
                compare.len()
            );
            figures
        };
        Ok((written, comparisons))
    })?;
    steps.run("build the widgets (wasm32)", || build_widgets(project))?;
    steps.run("build the book (mdBook)", || {
        render(project, data_dir, comparisons, written)
    })
}

fn build_widgets(project: &Project) -> Result<()> {
    let sizes = widgets::build_all(project)?;
    for size in &sizes {
        eprintln!(
            "    widget {}: {} KB of JS and wasm ({} KB gzipped; limit {} KB)",
            size.name,
            size.bytes / 1000,
            size.gzip_bytes / 1000,
            widgets::SIZE_LIMIT / 1000
        );
        ensure!(
            size.bytes <= widgets::SIZE_LIMIT,
            "widget {} is over its size limit",
            size.name
        );
    }
    Ok(())
}

fn render(
    project: &Project,
    data_dir: &Path,
    comparisons: Vec<charts::compare::Figure>,
    written: usize,
) -> Result<BuiltBook> {
    let mut lab_data = LabData::load(project, data_dir)?;
    lab_data.comparisons = comparisons;
    let mut book =
        MDBook::load(&project.root).map_err(|error| anyhow!("loading the book: {error:#}"))?;
    let mut failures = Vec::new();
    book.book.for_each_chapter_mut(|chapter| {
        if let Err(error) = expand_chapter(chapter, &lab_data) {
            failures.push(error);
        }
    });
    if let Some(first) = failures.into_iter().next() {
        return Err(first);
    }
    book.build()
        .map_err(|error| anyhow!("building the book: {error:#}"))?;

    // mdBook empties its output folder when it renders, so the charts and the
    // data they came from are copied in afterwards. It also copies book/data
    // (the reference runs) as a plain folder; the book links to lab-data/,
    // the runs it was actually drawn from, so that copy goes.
    let out = project.book_out();
    let copied_reference = out.join("data");
    if copied_reference.is_dir() {
        fs::remove_dir_all(&copied_reference)
            .with_context(|| format!("removing {}", copied_reference.display()))?;
    }
    copy_dir(&project.charts_dir(), &out.join("charts"))?;
    copy_dir(&project.root.join("target/widgets"), &out.join("widgets"))?;
    let data_out = out.join("lab-data");
    fs::create_dir_all(&data_out)?;
    for slug in lab_data.runs.keys() {
        let name = format!("{slug}.jsonl");
        fs::copy(data_dir.join(&name), data_out.join(&name))
            .with_context(|| format!("copying {name}"))?;
    }
    if !lab_data.full_runs.is_empty() {
        fs::create_dir_all(data_out.join(FULL_DIR))?;
    }
    for slug in lab_data.full_runs.keys() {
        let name = data_file(&format!("{slug}{FULL_SUFFIX}"));
        fs::copy(project.reference_data().join(&name), data_out.join(&name))
            .with_context(|| format!("copying {name}"))?;
    }
    eprintln!(
        "    {written} chart files, {} data files",
        lab_data.runs.len() + lab_data.full_runs.len()
    );
    Ok(BuiltBook {
        index: out.join("index.html"),
        contradicted: claims::report(&lab_data.contradicted.borrow()),
    })
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    if !from.exists() {
        return Ok(());
    }
    fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target)
                .with_context(|| format!("copying to {}", target.display()))?;
        }
    }
    Ok(())
}

fn expand_chapter(chapter: &mut Chapter, lab_data: &LabData) -> Result<()> {
    let Some(path) = chapter.path.clone() else {
        return Ok(());
    };
    let depth = path.components().count().saturating_sub(1);
    let to_root = "../".repeat(depth);
    chapter.content = expand(&chapter.content, &to_root, lab_data)
        .with_context(|| format!("book/{}", path.display()))?;
    Ok(())
}
