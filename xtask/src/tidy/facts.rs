//! The library facts stay in step (`book::facts`): every `{{#fact id}}` in
//! the book has an entry in `book/facts.toml`, every entry is marked
//! somewhere in the book, and every test an entry names is a test of
//! `facts/tests/facts` (`<module>::<name>`: a `#[test]` or
//! `#[tokio::test]` function `name` in `<module>.rs`).

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
};

use anyhow::{Context, Result};

use super::{Problems, files_with_extension};
use crate::book::{directive::well_formed, facts};

pub(super) fn check(root: &Path, problems: &mut Problems) -> Result<()> {
    let book_dir = root.join("book");
    let registry = match facts::load(&book_dir) {
        Ok(registry) => registry,
        Err(error) => {
            problems.add(format!("{error:#}"));
            return Ok(());
        }
    };
    let known: BTreeSet<&str> = registry.iter().map(|fact| fact.id.as_str()).collect();
    let mut pages = files_with_extension(&book_dir, "md")?;
    pages.extend(
        files_with_extension(&book_dir, "toml")?
            .into_iter()
            .filter(|page| !page.ends_with("facts.toml")),
    );
    let mut used = BTreeSet::new();
    for page in &pages {
        let text =
            fs::read_to_string(page).with_context(|| format!("reading {}", page.display()))?;
        let shown = page
            .strip_prefix(root)
            .unwrap_or(page)
            .display()
            .to_string();
        for (line, id) in markers(&text) {
            if known.contains(id) {
                used.insert(id.to_string());
            } else {
                problems.add(format!(
                    "{shown}:{line}: {{{{#fact {id}}}}} has no entry in book/facts.toml"
                ));
            }
        }
    }
    for fact in &registry {
        if !used.contains(&fact.id) {
            problems.add(format!(
                "book/facts.toml: fact {:?} is marked on no page: mark the statement with {{{{#fact {}}}}} or remove the entry",
                fact.id, fact.id
            ));
        }
    }
    let tests = tests_in(&root.join(facts::TEST_BINARY))?;
    for fact in &registry {
        if let Some(test) = &fact.test
            && !tests.contains(test)
        {
            problems.add(format!(
                "book/facts.toml: fact {:?} names test {test:?}, which {} does not have",
                fact.id,
                facts::TEST_BINARY
            ));
        }
    }
    Ok(())
}

/// Each `{{#fact id}}` of a page, with its line; one preceded by a backslash
/// is text (`book::directive`).
fn markers(text: &str) -> Vec<(usize, &str)> {
    well_formed(text)
        .filter(|directive| directive.name == "fact")
        .map(|directive| (directive.line, directive.args))
        .collect()
}

/// `<module>::<name>` of every test function in the facts test binary's
/// modules: a function whose attribute lines above it include a test one.
fn tests_in(dir: &Path) -> Result<BTreeSet<String>> {
    let mut tests = BTreeSet::new();
    let mut modules = BTreeMap::new();
    for file in files_with_extension(dir, "rs")? {
        let module = file
            .file_stem()
            .and_then(|stem| stem.to_str())
            .unwrap_or_default()
            .to_string();
        let text =
            fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        modules.insert(module, text);
    }
    for (module, text) in &modules {
        let mut after_test_attribute = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with("#[") {
                after_test_attribute |= line == "#[test]" || line.starts_with("#[tokio::test");
                continue;
            }
            if after_test_attribute {
                let name = line
                    .trim_start_matches("async ")
                    .strip_prefix("fn ")
                    .and_then(|rest| rest.split('(').next());
                if let Some(name) = name {
                    tests.insert(format!("{module}::{name}"));
                }
            }
            after_test_attribute = false;
        }
    }
    Ok(tests)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_found_with_their_lines_and_escaped_ones_skipped() {
        let text = "one {{#fact a-b}}\ntwo \\{{#fact c}} and {{#fact d}}";
        assert_eq!(markers(text), [(1, "a-b"), (2, "d")]);
    }

    #[test]
    fn the_facts_binary_tests_are_found_by_module() {
        let tests = tests_in(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../facts/tests/facts"))
            .expect("reading the facts tests");
        assert!(
            tests.contains("hyper::header_read_timeout_is_30_s_with_a_timer"),
            "{tests:?}"
        );
        assert!(
            tests.contains("tokio::a_multi_thread_runtime_has_one_worker_per_core"),
            "{tests:?}"
        );
        assert!(
            !tests.iter().any(|test| test.starts_with("main::")),
            "{tests:?}"
        );
    }
}
