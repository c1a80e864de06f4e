//! A workshop's comparison: the headline bar charts (`compare = true` in a
//! lab's charts.toml) drawn from several machines' runs at once. Each chart
//! keeps its groups (the lab's compared things); each machine gets a bar in
//! every group, its own colour, and its name in the legend: the `--name` its
//! runs were made with, or else its folder's name.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, ensure};

use super::{ChartSpec, Prepared, PreparedSeries, THEMES, draw, load_specs};
use crate::{data::RunData, project::Project};

/// The folder, under the charts folder, of the comparison charts.
pub const FOLDER: &str = "compare";

/// One comparison chart, as the book shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub slug: String,
    pub chart: String,
    pub title: String,
    /// The machines it compares, in the legend's order.
    pub machines: Vec<String>,
    pub caption: String,
}

impl Figure {
    /// The file of one rendering, relative to the charts folder.
    pub fn svg_name(&self, theme: &str) -> String {
        format!("{FOLDER}/{}-{}.{theme}.svg", self.slug, self.chart)
    }
}

/// One machine's runs: its name and the folder they are in.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineRuns {
    pub name: String,
    pub dir: PathBuf,
}

/// The machines behind `dirs`, in order, each named by the `--name` of its
/// runs or by its folder; a name given twice gets a number.
pub fn machines(dirs: &[PathBuf]) -> Result<Vec<MachineRuns>> {
    let mut machines: Vec<MachineRuns> = Vec::new();
    for dir in dirs {
        ensure!(dir.is_dir(), "--data {}: no such folder", dir.display());
        let mut named = None;
        let mut runs = 0;
        for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = entry?.path();
            if path
                .extension()
                .is_some_and(|extension| extension == "jsonl")
            {
                runs += 1;
                if named.is_none() {
                    named = RunData::load(&path)?.meta.name;
                }
            }
        }
        ensure!(
            runs > 0,
            "--data {}: no lab runs (*.jsonl) in it",
            dir.display()
        );
        let base = named.unwrap_or_else(|| {
            dir.file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_else(|| dir.display().to_string())
        });
        let taken: BTreeSet<&str> = machines
            .iter()
            .map(|machine| machine.name.as_str())
            .collect();
        let mut name = base.clone();
        let mut number = 2;
        while taken.contains(name.as_str()) {
            name = format!("{base}-{number}");
            number += 1;
        }
        machines.push(MachineRuns {
            name,
            dir: dir.clone(),
        });
    }
    Ok(machines)
}

/// One chart's data from several machines' runs: a series per machine, a
/// point per group (`x` is the group's index).
pub fn prepare(spec: &ChartSpec, runs: &[(String, RunData)]) -> Result<Prepared> {
    let mut groups: Vec<String> = Vec::new();
    let mut series = Vec::new();
    for (index, (machine, run)) in runs.iter().enumerate() {
        let own = spec
            .prepare(run)
            .with_context(|| format!("the runs of {machine}"))?;
        let names: Vec<String> = own.series.iter().map(|one| one.name.clone()).collect();
        if groups.is_empty() {
            groups = names;
        } else {
            ensure!(
                names == groups,
                "the runs of {machine} have the series {names:?}, not {groups:?}"
            );
        }
        let points = own
            .series
            .iter()
            .enumerate()
            .map(|(group, one)| (group as f64, one.points[0].1, group as f64))
            .collect();
        series.push(PreparedSeries {
            name: machine.clone(),
            points,
            colour: index,
        });
    }
    Ok(Prepared {
        series,
        marks: Vec::new(),
        groups,
    })
}

/// Draws every comparison chart from the machines' folders into
/// `charts_dir`'s `compare/` and returns what it drew. A machine without a
/// run of a lab is left out of that lab's charts.
pub fn draw_all(project: &Project, dirs: &[PathBuf], charts_dir: &Path) -> Result<Vec<Figure>> {
    let machines = machines(dirs)?;
    let out = charts_dir.join(FOLDER);
    fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let mut figures = Vec::new();
    for lab in project.labs()? {
        let specs: Vec<ChartSpec> = load_specs(&lab)?
            .into_iter()
            .filter(|spec| spec.compare)
            .collect();
        if specs.is_empty() {
            continue;
        }
        let runs = runs_of(&machines, &lab.slug)?;
        if runs.is_empty() {
            continue;
        }
        for spec in &specs {
            let prepared = prepare(spec, &runs)
                .with_context(|| format!("comparing chart {}/{}", lab.slug, spec.name))?;
            let captions: Vec<String> = runs
                .iter()
                .map(|(machine, run)| format!("{machine}: {}", run.caption_for(spec.clock)))
                .collect();
            let caption = format!("One bar per machine. {}", captions.join("; "));
            let figure = Figure {
                slug: lab.slug.clone(),
                chart: spec.name.clone(),
                title: spec.title.clone(),
                machines: runs.iter().map(|(machine, _)| machine.clone()).collect(),
                caption,
            };
            for theme in THEMES {
                let short = format!("{} machines", runs.len());
                let svg = draw::render(spec, &prepared, &theme, &short)?;
                let path = charts_dir.join(figure.svg_name(theme.name));
                fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
            }
            figures.push(figure);
        }
    }
    Ok(figures)
}

fn runs_of(machines: &[MachineRuns], slug: &str) -> Result<Vec<(String, RunData)>> {
    let mut runs = Vec::new();
    for machine in machines {
        let path: &Path = &machine.dir.join(format!("{slug}.jsonl"));
        if path.exists() {
            runs.push((machine.name.clone(), RunData::load(path)?));
        }
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of the reference runs whose meta records name `name`.
    fn named_copy(project: &Project, root: &Path, name: &str) -> PathBuf {
        let dir = root.join(format!("folder-of-{name}"));
        fs::create_dir_all(&dir).unwrap();
        for entry in fs::read_dir(project.reference_data()).unwrap() {
            let path = entry.unwrap().path();
            if path
                .extension()
                .is_none_or(|extension| extension != "jsonl")
            {
                continue;
            }
            let text = fs::read_to_string(&path).unwrap();
            let (first, rest) = text.split_once('\n').unwrap();
            let mut meta: serde_json::Value = serde_json::from_str(first).unwrap();
            meta["data"]["name"] = serde_json::Value::String(name.into());
            let named = format!("{meta}\n{rest}");
            fs::write(dir.join(path.file_name().unwrap()), named).unwrap();
        }
        dir
    }

    #[test]
    fn two_named_machines_are_both_on_every_comparison_chart() {
        let project = Project::locate();
        let root = tempfile::tempdir().unwrap();
        let dirs = [
            named_copy(&project, root.path(), "alice"),
            named_copy(&project, root.path(), "bob"),
        ];
        let charts = root.path().join("charts");
        let figures = draw_all(&project, &dirs, &charts).unwrap();
        let headline_charts: usize = project
            .labs()
            .unwrap()
            .iter()
            .map(|lab| {
                load_specs(lab)
                    .unwrap()
                    .iter()
                    .filter(|spec| spec.compare)
                    .count()
            })
            .sum();
        assert!(headline_charts >= 4, "{headline_charts}");
        assert_eq!(figures.len(), headline_charts);
        for figure in &figures {
            assert_eq!(figure.machines, ["alice", "bob"], "{figure:?}");
            for theme in THEMES {
                let svg = fs::read_to_string(charts.join(figure.svg_name(theme.name))).unwrap();
                assert!(
                    svg.contains("alice") && svg.contains("bob"),
                    "{}",
                    figure.chart
                );
            }
        }
    }

    #[test]
    fn machines_without_a_name_are_named_by_their_folder_and_never_twice() {
        let project = Project::locate();
        let reference = project.reference_data();
        let machines = machines(&[reference.clone(), reference.clone()]).unwrap();
        let names: Vec<&str> = machines
            .iter()
            .map(|machine| machine.name.as_str())
            .collect();
        assert_eq!(names, ["data", "data-2"]);
        let error = machines_error(&[PathBuf::from("/nonexistent/folder")]);
        assert!(error.contains("no such folder"), "{error}");
    }

    fn machines_error(dirs: &[PathBuf]) -> String {
        format!("{:#}", machines(dirs).unwrap_err())
    }
}
