//! Strict check: no two files of a crate import each other, directly or in a
//! loop. A loop means neither file can be read, changed or tested without
//! the other; the house keeps its modules layered instead (a type both need
//! lives below both).
//!
//! A small scanner rather than a parser (the xtask takes no dependency for
//! it), over every `src/` folder in labs/, exercises/, widgets/, facts/ and
//! xtask/ (binaries in `src/bin/` are crates of their own, and a file's
//! `#[cfg(test)] mod tests` is left out: a test may use anything). An edge
//! from file A to file B is a path in A's code, outside comments, that names
//! B's module after `crate::` or `super::` (`crate::b::f`, `super::b::B`, the
//! same inside a `use crate::{...}` group). An item of the crate root or of a
//! parent reached as `crate::Config` or `super::f` names no module: the root
//! declares the crate's modules and re-exports their names, which is not
//! depending on them.

use std::collections::{BTreeMap, BTreeSet};

use super::Problems;

/// Folders whose crates the rule covers.
const FOLDERS: [&str; 5] = ["labs/", "exercises/", "widgets/", "facts/", "xtask/"];

/// One crate's modules, by name (`crate`, `book::quiz`), each with its file
/// and the modules its code names.
type Graph = BTreeMap<String, (String, BTreeSet<String>)>;

/// Checks every crate among `sources` (path from the workspace root, text).
pub(super) fn check(sources: &[(String, String)], problems: &mut Problems) {
    let mut crates: BTreeMap<&str, Vec<(String, &str, &str)>> = BTreeMap::new();
    for (relative, text) in sources {
        if !FOLDERS.iter().any(|folder| relative.starts_with(folder)) {
            continue;
        }
        let Some(at) = relative.find("/src/") else {
            continue;
        };
        let (root, inner) = (&relative[..at], &relative[at + "/src/".len()..]);
        if inner.starts_with("bin/") {
            continue;
        }
        crates.entry(root).or_default().push((
            module_name(inner),
            relative.as_str(),
            text.as_str(),
        ));
    }
    for files in crates.values() {
        for cycle in cycles(&graph(files)) {
            problems.add(format!(
                "these files import each other, in a loop: {} (move what they share into a module below them)",
                cycle.join(" -> ")
            ));
        }
    }
}

/// `book/quiz.rs` is `book::quiz`; `book/mod.rs` is `book`; `lib.rs` is `crate`.
fn module_name(inner: &str) -> String {
    let path = inner.strip_suffix(".rs").unwrap_or(inner);
    let mut parts: Vec<&str> = path.split('/').collect();
    if matches!(parts.last(), Some(&("mod" | "lib" | "main"))) {
        parts.pop();
    }
    if parts.is_empty() {
        "crate".to_string()
    } else {
        parts.join("::")
    }
}

fn graph(files: &[(String, &str, &str)]) -> Graph {
    let modules: BTreeSet<&str> = files.iter().map(|(name, ..)| name.as_str()).collect();
    let mut graph = Graph::new();
    for (name, file, text) in files {
        let code = code_of(text);
        let parent = match name.rsplit_once("::") {
            Some((parent, _)) => parent.to_string(),
            None if name == "crate" => String::new(),
            None => "crate".to_string(),
        };
        let mut named = BTreeSet::new();
        let mut resolve = |base: &str, path: &str| {
            let segments: Vec<&str> = path.split("::").collect();
            for end in (1..=segments.len()).rev() {
                let tail = segments[..end].join("::");
                let candidate = match base {
                    "" | "crate" => tail,
                    base => format!("{base}::{tail}"),
                };
                if modules.contains(candidate.as_str()) {
                    if candidate != *name {
                        named.insert(candidate);
                    }
                    return;
                }
            }
        };
        for path in paths_after(&code, "crate::") {
            resolve("crate", &path);
        }
        for path in paths_after(&code, "super::") {
            resolve(&parent, &path);
        }
        graph.insert(name.clone(), (file.to_string(), named));
    }
    graph
}

/// A file's code as the rule reads it: its `#[cfg(test)] mod tests` and
/// every `//` comment left out.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path after `prefix` in `code`: `a::b::C` after `crate::`, and each
/// item of a `crate::{a::b, c::{d, e}}` group (`a::b`, `c::d`, `c::e`).
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[at + prefix.len()..];
        tree(rest, "", &mut found);
    }
    found
}

/// Reads one use-tree at the start of `text` (`a::b`, `a::{b, c::d}`, `{a, b}`)
/// and pushes each leaf path, prefixed with `prefix`.
fn tree(text: &str, prefix: &str, found: &mut Vec<String>) {
    let path_end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(text.len());
    let path = text[..path_end].trim_end_matches(':');
    let joined = match (prefix.is_empty(), path.is_empty()) {
        (true, _) => path.to_string(),
        (false, true) => prefix.to_string(),
        (false, false) => format!("{prefix}::{path}"),
    };
    let rest = &text[path_end..];
    if (path_end == 0 || text[..path_end].ends_with("::")) && rest.starts_with('{') {
        for item in group_items(&rest[1..]) {
            tree(item.trim_start(), &joined, found);
        }
    } else if !joined.is_empty() {
        found.push(joined);
    }
}

/// The top-level items of a `{...}` group whose opening brace is already
/// read: split at commas outside nested braces, up to the closing brace.
fn group_items(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (at, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&text[start..at]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    items
}

/// The loops of `graph`, each as the files in it (Tarjan's strongly
/// connected components of more than one module).
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, module: &'a str) {
            let at = self.index.len();
            self.index.insert(module, at);
            self.low.insert(module, at);
            self.stack.push(module);
            for next in &self.graph[module].1 {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[module].min(self.low[next]);
                    self.low.insert(module, low);
                } else if self.stack.contains(&next) {
                    let low = self.low[module].min(self.index[next]);
                    self.low.insert(module, low);
                }
            }
            if self.low[module] == self.index[module] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    component.push(self.graph[top].0.clone());
                    if top == module {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for module in graph.keys() {
        if !walk.index.contains_key(module.as_str()) {
            walk.visit(module);
        }
    }
    walk.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(files: &[(&str, &str)]) -> Vec<String> {
        let sources: Vec<(String, String)> = files
            .iter()
            .map(|(path, text)| (path.to_string(), text.to_string()))
            .collect();
        let mut problems = Problems::default();
        check(&sources, &mut problems);
        problems.0
    }

    #[test]
    fn two_files_that_import_each_other_are_a_loop() {
        let found = problems(&[
            (
                "labs/demo/src/lib.rs",
                "//! x\nmod a;\nmod b;\npub use a::A;\n",
            ),
            (
                "labs/demo/src/a.rs",
                "//! x\nuse crate::b::B;\npub struct A;\n",
            ),
            (
                "labs/demo/src/b.rs",
                "//! x\nuse crate::{Config, a::A};\npub struct B;\n",
            ),
        ]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("labs/demo/src/a.rs -> labs/demo/src/b.rs"),
            "{found:?}"
        );
    }

    #[test]
    fn a_loop_through_super_and_nested_groups_is_found_and_layers_are_not() {
        let looped = problems(&[
            ("xtask/src/main.rs", "//! x\nmod book;\n"),
            ("xtask/src/book/mod.rs", "//! x\nmod a;\nmod b;\n"),
            (
                "xtask/src/book/a.rs",
                "//! x\nuse super::{LabData, b::{self, B}};\n",
            ),
            ("xtask/src/book/b.rs", "//! x\nfn f() { super::a::g() }\n"),
        ]);
        assert_eq!(looped.len(), 1, "{looped:?}");
        let layered = problems(&[
            ("xtask/src/main.rs", "//! x\nmod book;\n"),
            ("xtask/src/book/mod.rs", "//! x\nmod a;\nmod b;\n"),
            ("xtask/src/book/a.rs", "//! x\nuse super::b::B;\n"),
            (
                "xtask/src/book/b.rs",
                "//! x\n// super::a::g in a comment\n#[cfg(test)]\nmod tests {\n    use super::super::a::g;\n}\n",
            ),
            ("xtask/src/bin/tool.rs", "//! x\nuse crate::a::A;\n"),
        ]);
        assert!(layered.is_empty(), "{layered:?}");
    }
}
