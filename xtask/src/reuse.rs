//! Runs reused, as a build tool reuses an artifact: `cargo xtask book` runs a
//! lab again only when the reader's last run of it (in target/data) is
//! missing, unreadable, of another mode, made with `--set` or `--name`, or
//! made by another binary than the one just built (the meta record's
//! `binary`, see `lab_kit::binary`), or when the reader asks (`--rerun`,
//! `--rerun <slug>...`). One line per lab says which, and why.

use std::path::Path;

use anyhow::Result;
use lab_kit::Mode;

use crate::{book::Rerun, data::RunData, project::Lab, project::Project};

/// Why a lab runs now, or that its last run stands.
#[derive(Debug, PartialEq)]
pub enum RunChoice {
    /// The run in the data folder, from this time, made by this very binary.
    Reuse {
        started: String,
    },
    Run {
        why: String,
    },
}

/// The labs of `labs` to run now into `data_dir`, after one line per lab
/// saying what happens to it.
pub fn labs_to_run(
    project: &Project,
    labs: &[Lab],
    mode: Mode,
    rerun: &Rerun,
    data_dir: &Path,
) -> Result<Vec<Lab>> {
    let binaries = project.cargo_target().join("release");
    let mut to_run = Vec::new();
    for lab in labs {
        let asked = match rerun {
            Rerun::Changed => false,
            Rerun::All => true,
            Rerun::Named(names) => names.contains(&lab.slug),
        };
        let verdict = if asked {
            RunChoice::Run {
                why: "asked with --rerun".into(),
            }
        } else {
            let built = lab_kit::binary::id_of(&binaries.join(&lab.package)).ok();
            verdict(
                &data_dir.join(format!("{}.jsonl", lab.slug)),
                mode,
                built.as_deref(),
            )
        };
        match &verdict {
            RunChoice::Reuse { started } => eprintln!(
                "    {}: your run from {}, binary unchanged",
                lab.slug,
                shown_time(started)
            ),
            RunChoice::Run { why } => {
                eprintln!("    {}: runs now ({why})", lab.slug);
                to_run.push(lab.clone());
            }
        }
    }
    Ok(to_run)
}

/// Whether the run at `path` can stand for a run of `mode` by the binary
/// whose id is `built`.
pub fn verdict(path: &Path, mode: Mode, built: Option<&str>) -> RunChoice {
    let run = |why: &str| RunChoice::Run { why: why.into() };
    if !path.is_file() {
        return run("no run yet");
    }
    let Ok(data) = RunData::load(path) else {
        return run("the last run could not be read");
    };
    let meta = &data.meta;
    let started = shown_time(&meta.started);
    if meta.mode != mode {
        return run(&format!("your run from {started} was {} mode", meta.mode));
    }
    if !meta.set.is_empty() || meta.name.is_some() {
        return run(&format!(
            "your run from {started} was made with --set or --name"
        ));
    }
    match (meta.binary.as_deref(), built) {
        (Some(recorded), Some(built)) if recorded == built => RunChoice::Reuse {
            started: meta.started.clone(),
        },
        (None, _) => run(&format!("your run from {started} names no binary")),
        _ => run(&format!("the binary changed since your run from {started}")),
    }
}

/// `2026-12-03T14:02:11Z` as `2026-12-03 14:02 UTC`.
fn shown_time(rfc3339: &str) -> String {
    match rfc3339.get(..16) {
        Some(minutes) => format!("{} UTC", minutes.replacen('T', " ", 1)),
        None => rfc3339.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reference run with its meta record's binary, mode or settings
    /// changed, written to a temporary folder.
    fn run_with(edit: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
        let project = Project::locate();
        let text =
            std::fs::read_to_string(project.reference_data().join("conn-reuse.jsonl")).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let mut meta: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        meta["data"]["binary"] = "1-00000000000000aa".into();
        edit(&mut meta["data"]);
        lines[0] = meta.to_string();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("conn-reuse.jsonl"), lines.join("\n") + "\n").unwrap();
        dir
    }

    #[test]
    fn a_run_is_reused_only_when_made_by_the_same_binary_in_the_same_mode() {
        let same = Some("1-00000000000000aa");
        let dir = run_with(|_| {});
        let path = dir.path().join("conn-reuse.jsonl");
        assert!(matches!(
            verdict(&path, Mode::Quick, same),
            RunChoice::Reuse { .. }
        ));
        let RunChoice::Run { why } = verdict(&path, Mode::Quick, Some("1-00000000000000bb")) else {
            panic!("another binary must run again");
        };
        assert!(
            why.starts_with("the binary changed since your run from 20"),
            "{why}"
        );
        let RunChoice::Run { why } = verdict(&path, Mode::Full, same) else {
            panic!("another mode must run again");
        };
        assert!(why.ends_with("was quick mode"), "{why}");
        let RunChoice::Run { why } = verdict(&dir.path().join("none.jsonl"), Mode::Quick, same)
        else {
            panic!("no run must run");
        };
        assert_eq!(why, "no run yet");
        let dir = run_with(|meta| meta["set"] = serde_json::json!(["in_flight=1"]));
        let path = dir.path().join("conn-reuse.jsonl");
        assert!(matches!(
            verdict(&path, Mode::Quick, same),
            RunChoice::Run { .. }
        ));
        std::fs::write(&path, "{not json\n").unwrap();
        let RunChoice::Run { why } = verdict(&path, Mode::Quick, same) else {
            panic!("a corrupt run must run again");
        };
        assert_eq!(why, "the last run could not be read");
    }
}
