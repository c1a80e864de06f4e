//! The test binaries cargo built, read from its JSON messages, and what each
//! package's manifest says about where they may run.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

/// Where a run of a test binary goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lane {
    /// Its tests time the CPU: nothing else runs beside it.
    Alone,
    /// Its tests wait on timers: it runs in the one batch of such binaries.
    SideBySide,
    /// Its tests only sleep, for long: it runs from the first batch to the
    /// last, beside all of them (an idle connection held 90 s costs no CPU).
    Background,
}

/// Which tests of a binary one run runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Every,
    /// Only these (full names).
    Only(Vec<String>),
    /// Only these, with [`lab_kit::REAL_TIME`] set: tests that take long in
    /// real time, and skip themselves where it is not set.
    RealTime(Vec<String>),
    /// Every test but these.
    AllBut(Vec<String>),
}

impl Part {
    /// libtest's arguments for this part.
    pub fn arguments(&self) -> Vec<String> {
        let mut arguments = Vec::new();
        match self {
            Part::Every => {}
            Part::Only(names) | Part::RealTime(names) => {
                arguments.extend(names.iter().cloned());
                arguments.push("--exact".into());
            }
            Part::AllBut(names) => {
                arguments.push("--exact".into());
                for name in names {
                    arguments.push("--skip".into());
                    arguments.push(name.clone());
                }
            }
        }
        arguments
    }

    /// The tests this part names, which must all run.
    pub fn named(&self) -> Option<&[String]> {
        match self {
            Part::Only(names) | Part::RealTime(names) => Some(names),
            Part::Every | Part::AllBut(_) => None,
        }
    }
}

/// One run of a test binary cargo built.
#[derive(Debug, Clone)]
pub struct TestBinary {
    /// The package's folder, where cargo would run the binary.
    pub dir: PathBuf,
    /// "lab-dns tests/mechanism", "lab-kit (unit tests)".
    pub name: String,
    pub executable: PathBuf,
    pub lane: Lane,
    pub part: Part,
}

/// The runs of the test binary a line of cargo's JSON messages announces:
/// none for another message; one; or more where its package names tests
/// that run in another lane than the package's (see [`Package`]).
pub fn from_message(line: &str) -> Result<Vec<TestBinary>> {
    let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
        return Ok(Vec::new());
    };
    if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
        return Ok(Vec::new());
    }
    let Some(executable) = message["executable"].as_str() else {
        return Ok(Vec::new());
    };
    let manifest = PathBuf::from(
        message["manifest_path"]
            .as_str()
            .context("a compiler-artifact message names its manifest")?,
    );
    let target = &message["target"];
    let target_name = target["name"].as_str().unwrap_or_default();
    let kinds: Vec<&str> = target["kind"]
        .as_array()
        .map(|kinds| kinds.iter().filter_map(|kind| kind.as_str()).collect())
        .unwrap_or_default();
    let package = Package::read(&manifest)?;
    let integration = kinds.contains(&"test");
    let name = if integration {
        format!("{} tests/{target_name}", package.name)
    } else if kinds.contains(&"bin") {
        format!("{} bin {target_name} (unit tests)", package.name)
    } else {
        format!("{} (unit tests)", package.name)
    };
    let lane = match package.side_by_side {
        true => Lane::SideBySide,
        false => Lane::Alone,
    };
    let whole = TestBinary {
        dir: manifest
            .parent()
            .context("a manifest has a folder")?
            .to_path_buf(),
        name,
        executable: executable.into(),
        lane,
        part: Part::Every,
    };
    let (waiting, background) = match integration {
        true => (
            package.groups("side-by-side-tests", target_name),
            package.names("background-tests", target_name),
        ),
        false => (Vec::new(), Vec::new()),
    };
    let mut runs = Vec::new();
    // The binary's own run leaves out what runs elsewhere.
    let mut elsewhere = background.clone();
    if !background.is_empty() {
        runs.push(TestBinary {
            name: format!("{} (in the background)", whole.name),
            lane: Lane::Background,
            part: Part::RealTime(background),
            ..whole.clone()
        });
    }
    if lane == Lane::Alone {
        let groups = waiting.len();
        for (index, group) in waiting.into_iter().enumerate() {
            elsewhere.extend(group.iter().cloned());
            let which = match groups {
                1 => String::new(),
                _ => format!(", {} of {groups}", index + 1),
            };
            runs.push(TestBinary {
                name: format!("{} (its waiting tests{which})", whole.name),
                lane: Lane::SideBySide,
                part: Part::Only(group),
                ..whole.clone()
            });
        }
    }
    if elsewhere.is_empty() {
        runs.push(whole);
    } else {
        runs.push(TestBinary {
            name: format!("{} (the rest)", whole.name),
            part: Part::AllBut(elsewhere),
            ..whole
        });
    }
    Ok(runs)
}

/// What a package's manifest says about running its tests.
struct Package {
    name: String,
    /// Its tests may run beside other packages': `side-by-side = true` under
    /// `[package.metadata.lab]` (a lab that waits on timers) or
    /// `[package.metadata.tests]` (a crate that is not a lab).
    side_by_side: bool,
    /// `[package.metadata.tests]`, where two tables name tests by test
    /// target: `side-by-side-tests` (tests of a package that runs alone that
    /// only wait, so they run in the side-by-side batch) and
    /// `background-tests` (tests that sleep for long in real time, run in
    /// the background with [`lab_kit::REAL_TIME`] set).
    tests: toml::Table,
}

impl Package {
    fn read(manifest: &Path) -> Result<Package> {
        let text = fs::read_to_string(manifest)
            .with_context(|| format!("reading {}", manifest.display()))?;
        let value: toml::Table =
            toml::from_str(&text).with_context(|| format!("parsing {}", manifest.display()))?;
        let package = value
            .get("package")
            .with_context(|| format!("{}: no [package]", manifest.display()))?;
        let name = package
            .get("name")
            .and_then(|name| name.as_str())
            .with_context(|| format!("{}: no package name", manifest.display()))?;
        let table = |name: &str| {
            package
                .get("metadata")
                .and_then(|metadata| metadata.get(name))
                .and_then(|table| table.as_table())
        };
        let says = |name: &str| {
            table(name)
                .and_then(|table| table.get("side-by-side"))
                .and_then(|flag| flag.as_bool())
                .unwrap_or(false)
        };
        Ok(Package {
            name: name.to_string(),
            side_by_side: says("lab") || says("tests"),
            tests: table("tests").cloned().unwrap_or_default(),
        })
    }

    /// The test names `[package.metadata.tests.<table>]` gives `target`.
    fn names(&self, table: &str, target: &str) -> Vec<String> {
        self.groups(table, target).concat()
    }

    /// The names `table` gives for `target`, as groups that run as separate
    /// processes, side by side: a list of names is one group, a list of
    /// lists is one group each (a binary whose waiting tests, one after
    /// another, would outlast the rest of the batch).
    fn groups(&self, table: &str, target: &str) -> Vec<Vec<String>> {
        let strings = |names: &toml::Value| -> Vec<String> {
            names
                .as_array()
                .map(|names| {
                    names
                        .iter()
                        .filter_map(|name| name.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let Some(items) = self
            .tests
            .get(table)
            .and_then(|table| table.get(target))
            .and_then(|names| names.as_array())
        else {
            return Vec::new();
        };
        if items.iter().all(|item| item.is_array()) {
            items
                .iter()
                .map(strings)
                .filter(|group| !group.is_empty())
                .collect()
        } else {
            let group = strings(&toml::Value::Array(items.clone()));
            if group.is_empty() {
                Vec::new()
            } else {
                vec![group]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(lab: &str, target: &str) -> String {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        serde_json::json!({
            "reason": "compiler-artifact",
            "manifest_path": root.join(lab).join("Cargo.toml"),
            "target": {"name": target, "kind": ["test"]},
            "profile": {"test": true},
            "executable": "/t/binary-123",
        })
        .to_string()
    }

    #[test]
    fn a_test_artifact_is_named_by_package_and_target_and_others_are_skipped() {
        let line = message("labs/dns", "mechanism");
        let found = from_message(&line).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].name, "lab-dns tests/mechanism");
        assert_eq!(found[0].lane, Lane::Alone, "dns measures the CPU");
        assert_eq!(found[0].part, Part::Every);
        let keepalive = message("labs/keepalive-race", "keepalive-race");
        assert_eq!(from_message(&keepalive).unwrap()[0].lane, Lane::SideBySide);
        let not_a_test = line.replace("\"test\":true", "\"test\":false");
        assert!(from_message(&not_a_test).unwrap().is_empty());
        assert!(from_message("Compiling foo").unwrap().is_empty());
    }

    #[test]
    fn a_package_that_runs_alone_may_send_its_waiting_tests_to_the_batch() {
        // The overload lab runs alone, but names the tests of its own that
        // only wait: its binary runs twice, those beside the others.
        let parts = from_message(&message("labs/overload", "overload")).unwrap();
        assert_eq!(parts.len(), 2);
        let Part::Only(waiting) = &parts[0].part else {
            panic!("{:?}", parts[0].part)
        };
        assert_eq!(parts[0].lane, Lane::SideBySide);
        assert_eq!(parts[1].lane, Lane::Alone);
        assert_eq!(parts[1].part, Part::AllBut(waiting.clone()));
        let only = parts[0].part.arguments();
        assert_eq!(only.last().map(String::as_str), Some("--exact"));
        let rest = parts[1].part.arguments();
        assert_eq!(
            rest.iter().filter(|word| *word == "--skip").count(),
            waiting.len()
        );
    }

    #[test]
    fn waiting_tests_in_groups_run_as_a_process_each() {
        // The doctor's waiting tests come in two groups: two processes in
        // the batch, and the rest alone, without either group.
        let parts = from_message(&message("labs/doctor", "doctor")).unwrap();
        assert_eq!(parts.len(), 3, "{parts:?}");
        let groups: Vec<&Vec<String>> = parts[..2]
            .iter()
            .map(|part| match &part.part {
                Part::Only(names) => names,
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(parts[..2].iter().all(|part| part.lane == Lane::SideBySide));
        assert!(
            parts[0].name.ends_with("(its waiting tests, 1 of 2)"),
            "{}",
            parts[0].name
        );
        assert_eq!(parts[2].lane, Lane::Alone);
        let both: Vec<String> = groups.into_iter().flatten().cloned().collect();
        assert_eq!(parts[2].part, Part::AllBut(both));
    }

    #[test]
    fn a_long_real_time_test_runs_in_the_background_and_only_there() {
        let runs = from_message(&message("facts", "facts")).unwrap();
        assert_eq!(runs.len(), 2, "{runs:?}");
        assert_eq!(runs[0].lane, Lane::Background);
        let Part::RealTime(long) = &runs[0].part else {
            panic!("{:?}", runs[0].part)
        };
        // The rest of the facts run side by side, without it.
        assert_eq!(runs[1].lane, Lane::SideBySide);
        assert_eq!(runs[1].part, Part::AllBut(long.clone()));
    }
}
