//! The book's library facts: `book/facts.toml`, one entry per statement about
//! how a library, the kernel or a platform behaves by default. A page marks
//! such a statement with `{{#fact <id>}}`, which renders a small marker
//! linking to the entry in the "How we know" appendix; `{{#facts}}` renders
//! the appendix itself: every fact with the test in `facts` that proves
//! it and the version of the crate that test ran against (from Cargo.lock),
//! or, for Node, nginx, an ALB, Kubernetes or an RFC, the documentation it
//! cites and its version. `tidy::facts` keeps the three in step.

use std::{collections::BTreeSet, fs, path::Path};

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;

/// The page that lists the facts, and the anchor of each entry in it.
pub const APPENDIX: &str = "how-we-know.html";

/// Where the tests live, as the appendix names them.
pub const TEST_BINARY: &str = "facts/tests/facts";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Registry {
    fact: Vec<Fact>,
}

/// One entry of `book/facts.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fact {
    pub id: String,
    pub statement: String,
    /// A package in Cargo.lock, or "linux".
    #[serde(rename = "crate")]
    pub crate_name: Option<String>,
    /// `<module>::<test_name>` in the facts test binary.
    pub test: Option<String>,
    /// Node.js, nginx, AWS ALB, Kubernetes, an RFC.
    pub platform: Option<String>,
    /// The documented version a cited fact holds for.
    pub version: Option<String>,
    pub source: Option<String>,
    /// For a crate's fact that cites its documentation: why no test runs it.
    pub why_cited: Option<String>,
}

impl Fact {
    /// The anchor of the entry in the appendix.
    pub fn anchor(&self) -> String {
        format!("fact-{}", self.id)
    }

    fn check(&self) -> Result<()> {
        ensure!(
            !self.id.is_empty()
                && self
                    .id
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "fact id {:?}: lowercase letters, digits and hyphens only",
            self.id
        );
        match (
            &self.crate_name,
            &self.test,
            &self.platform,
            &self.source,
            &self.why_cited,
        ) {
            (Some(_), Some(test), None, None, None) => {
                ensure!(
                    test.split_once("::")
                        .is_some_and(|(module, name)| !module.is_empty() && !name.is_empty()),
                    "fact {}: test {test:?} is not <module>::<test_name>",
                    self.id
                );
            }
            (Some(_), None, None, Some(_), Some(_)) => {}
            (None, None, Some(_), Some(_), None) => ensure!(
                self.version.is_some(),
                "fact {}: a platform's fact names the version its source documents",
                self.id
            ),
            _ => bail!(
                "fact {}: give `crate` and `test`; or `crate`, `source` and `why_cited`; or `platform`, `version` and `source`",
                self.id
            ),
        }
        Ok(())
    }
}

/// Reads and checks `book/facts.toml`: every entry well formed, no id twice.
pub fn load(book_dir: &Path) -> Result<Vec<Fact>> {
    let path = book_dir.join("facts.toml");
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let registry: Registry =
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let mut seen = BTreeSet::new();
    for fact in &registry.fact {
        fact.check().context("book/facts.toml")?;
        ensure!(
            seen.insert(fact.id.as_str()),
            "book/facts.toml: fact {:?} is listed twice",
            fact.id
        );
    }
    Ok(registry.fact)
}

/// The version of each crate a fact names, as the workspace links it.
pub fn versions(root: &Path, facts: &[Fact]) -> Vec<(String, String)> {
    let lock = fs::read_to_string(root.join("Cargo.lock")).unwrap_or_default();
    let names: BTreeSet<&str> = facts
        .iter()
        .filter_map(|fact| fact.crate_name.as_deref())
        .filter(|name| *name != "linux")
        .collect();
    let names: Vec<&str> = names.into_iter().collect();
    let mut found: Vec<(String, String)> = lab_kit::lockfile::linked_versions(&lock, &names)
        .into_iter()
        .map(|(name, version)| (name.to_string(), version))
        .collect();
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|release| format!("{} (the machine this page was built on)", release.trim()))
        .unwrap_or_else(|_| "(the machine this page was built on)".to_string());
    found.push(("linux".to_string(), kernel));
    found
}

/// `{{#fact <id>}}`: a small marker after the statement, linking to its entry.
pub fn marker(id: &str, to_root: &str, facts: &[Fact]) -> Result<String> {
    let fact = facts
        .iter()
        .find(|fact| fact.id == id)
        .with_context(|| format!("no fact {id:?} in book/facts.toml"))?;
    let (label, how) = match (&fact.test, &fact.source) {
        (Some(test), _) => ("tested", format!("tested by {test}")),
        (None, _) => ("cited", "cited from its documentation".to_string()),
    };
    Ok(format!(
        "<sup class=\"fact\"><a href=\"{to_root}{APPENDIX}#{}\" title=\"{} ({})\">{label}</a></sup>",
        fact.anchor(),
        html_attribute(&fact.statement),
        html_attribute(&how),
    ))
}

/// `{{#facts}}`: the appendix's list, tested facts first (grouped by crate),
/// then the cited ones.
pub fn appendix(facts: &[Fact], versions: &[(String, String)]) -> String {
    let version_of = |name: &str| {
        versions
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, version)| version.clone())
            .unwrap_or_else(|| "not in Cargo.lock".to_string())
    };
    let mut out = String::new();
    let tested: Vec<&Fact> = facts.iter().filter(|fact| fact.test.is_some()).collect();
    let cited: Vec<&Fact> = facts.iter().filter(|fact| fact.test.is_none()).collect();
    let tests: BTreeSet<&str> = tested
        .iter()
        .filter_map(|fact| fact.test.as_deref())
        .collect();
    out.push_str(&format!(
        "\n{} facts: {} tested by {} tests in `{TEST_BINARY}`, {} cited.\n\n",
        facts.len(),
        tested.len(),
        tests.len(),
        cited.len()
    ));
    out.push_str(
        "## Tested\n\n<div class=\"lab-table\">\n\n| fact | crate | test |\n|:--|:--|:--|\n",
    );
    for fact in &tested {
        let name = fact.crate_name.as_deref().unwrap_or_default();
        out.push_str(&format!(
            "| <a id=\"{}\"></a>{} | {name} {} | `{}` |\n",
            fact.anchor(),
            table_cell(&fact.statement),
            version_of(name),
            fact.test.as_deref().unwrap_or_default()
        ));
    }
    out.push_str("\n</div>\n\n## Cited\n\n<div class=\"lab-table\">\n\n| fact | of | source |\n|:--|:--|:--|\n");
    for fact in &cited {
        let (of, why) = match (&fact.platform, &fact.crate_name) {
            (Some(platform), _) => (
                format!("{platform} {}", fact.version.as_deref().unwrap_or_default()),
                String::new(),
            ),
            (None, Some(name)) => (
                format!("{name} {}", version_of(name)),
                format!(
                    " (not tested: {})",
                    fact.why_cited.as_deref().unwrap_or_default()
                ),
            ),
            (None, None) => (String::new(), String::new()),
        };
        out.push_str(&format!(
            "| <a id=\"{}\"></a>{}{} | {of} | [documentation]({}) |\n",
            fact.anchor(),
            table_cell(&fact.statement),
            table_cell(&why),
            fact.source.as_deref().unwrap_or_default()
        ));
    }
    out.push_str("\n</div>\n");
    out
}

fn table_cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn html_attribute(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('`', "")
        .replace('|', "&#124;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(id: &str, test: Option<&str>) -> Fact {
        Fact {
            id: id.to_string(),
            statement: "hyper's `x` is 30 s".to_string(),
            crate_name: Some("hyper".to_string()),
            test: test.map(str::to_string),
            platform: None,
            version: None,
            source: None,
            why_cited: None,
        }
    }

    #[test]
    fn a_marker_links_to_its_entry_and_an_unknown_id_is_an_error() {
        let facts = [fact("hyper-x", Some("hyper::x_is_30_s"))];
        let marker = marker("hyper-x", "../", &facts).expect("a known id");
        assert!(
            marker.contains("href=\"../how-we-know.html#fact-hyper-x\""),
            "{marker}"
        );
        assert!(marker.contains("tested by hyper::x_is_30_s"), "{marker}");
        let error = super::marker("hyper-y", "", &facts).expect_err("an unknown id");
        assert!(format!("{error:#}").contains("no fact \"hyper-y\""));
    }

    #[test]
    fn the_appendix_names_each_test_and_version() {
        let facts = [fact("hyper-x", Some("hyper::x_is_30_s"))];
        let text = appendix(&facts, &[("hyper".to_string(), "1.12.0".to_string())]);
        assert!(text.contains("<a id=\"fact-hyper-x\"></a>"), "{text}");
        assert!(
            text.contains("| hyper 1.12.0 | `hyper::x_is_30_s` |"),
            "{text}"
        );
        assert!(text.contains("1 facts: 1 tested by 1 tests"), "{text}");
    }

    #[test]
    fn an_entry_names_a_test_or_a_source() {
        assert!(fact("a", Some("m::t")).check().is_ok());
        assert!(fact("a", None).check().is_err());
        assert!(fact("a", Some("no_module")).check().is_err());
        assert!(fact("A b", Some("m::t")).check().is_err());
    }
}
