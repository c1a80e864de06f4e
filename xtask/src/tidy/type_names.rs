//! Strict check: no public type name (`pub` or `pub(crate)` `struct`, `enum`,
//! `trait` or `type`) is defined twice in one package (its library, binaries
//! and tests together), so a name means one thing wherever the package's code,
//! errors and chapter use it. Across packages a name's path tells them apart,
//! as Rust means it to: each lab's settings are its `Config`
//! (`lab_dns::Config`, `lab_overload::Config`).

use std::collections::BTreeMap;

use super::Problems;

/// The public type names a source defines, with their line numbers.
fn definitions(source: &str) -> Vec<(&str, usize)> {
    let mut found = Vec::new();
    for (index, line) in source.lines().enumerate() {
        let Some(rest) = ["pub(crate) ", "pub "]
            .iter()
            .find_map(|visibility| line.trim_start().strip_prefix(visibility))
        else {
            continue;
        };
        let Some(rest) = ["struct ", "enum ", "trait ", "type "]
            .iter()
            .find_map(|keyword| rest.strip_prefix(keyword))
        else {
            continue;
        };
        let end = rest
            .find(|character: char| !(character.is_alphanumeric() || character == '_'))
            .unwrap_or(rest.len());
        if end > 0 {
            found.push((&rest[..end], index + 1));
        }
    }
    found
}

/// The package a source belongs to: its folder (`labs/dns`,
/// `exercises/kit`, `widgets/overload-sim`, `xtask`, `facts`), as the
/// workspace's members are laid out.
fn crate_of(path: &str) -> &str {
    let mut ends = path.match_indices('/').map(|(index, _)| index);
    let first = ends.next().unwrap_or(path.len());
    match &path[..first] {
        "labs" | "exercises" | "widgets" => &path[..ends.next().unwrap_or(path.len())],
        _ => &path[..first],
    }
}

/// Checks every source at once: `(path from the workspace root, text)`.
pub(super) fn check(sources: &[(String, String)], problems: &mut Problems) {
    let mut places: BTreeMap<(&str, &str), Vec<String>> = BTreeMap::new();
    for (path, text) in sources {
        // An exercise's solution is the reader's file fixed: it defines the
        // same names on purpose, and the check compiles it as a module.
        if path.starts_with("drafts/")
            || (path.starts_with("exercises/") && path.contains("/solution/"))
        {
            continue;
        }
        for (name, line) in definitions(text) {
            places
                .entry((crate_of(path), name))
                .or_default()
                .push(format!("{path}:{line}"));
        }
    }
    for ((krate, name), places) in places {
        if places.len() > 1 {
            problems.add(format!(
                "public type name {name} is defined {} times in {krate} ({}): give each its own name",
                places.len(),
                places.join(", ")
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_name_defined_twice_in_one_crate_is_named_with_its_places() {
        let sources = [
            (
                "labs/a/src/lib.rs",
                "//! a\npub struct Config {\n}\nstruct Private;\n/// pub struct Doc\n",
            ),
            (
                "labs/a/tests/a/main.rs",
                "//! a's tests\n\npub(crate) enum Config<T> { A(T) }\nstruct Private;\n",
            ),
            // Other packages' `Config`s: their paths tell them apart.
            ("labs/b/src/config.rs", "//! b\npub struct Config;\n"),
            ("xtask/src/y.rs", "//! y\npub struct Config;\n"),
            (
                "xtask/src/x.rs",
                "//! x\n    pub type Alias = u8;\npub trait Unique {}\n",
            ),
            ("drafts/c/src/lib.rs", "pub type Alias = u16;\n"),
        ]
        .map(|(path, text)| (path.to_string(), text.to_string()));
        let mut problems = Problems::default();
        check(&sources, &mut problems);
        assert_eq!(
            crate_of("widgets/overload-sim/src/sim/config.rs"),
            "widgets/overload-sim"
        );
        assert_eq!(crate_of("xtask/src/main.rs"), "xtask");
        assert_eq!(
            problems.0,
            [
                "public type name Config is defined 2 times in labs/a (labs/a/src/lib.rs:2, labs/a/tests/a/main.rs:3): give each its own name"
            ]
        );
    }
}
