//! Tidy checks on the built book: every relative href and src resolves to a
//! file, and every fragment into another page names an id that page has.

use std::{
    collections::{HashMap, HashSet},
    fs,
    path::{Component, Path, PathBuf},
};

use anyhow::{Context, Result};

use super::{Problems, files_with_extension};

/// Checks on the built book: every relative href and src resolves to a file,
/// and every fragment into another page names an id that page has.
pub fn check_built_book(book_out: &Path) -> Result<Problems> {
    let mut problems = Problems::default();
    let pages = files_with_extension(book_out, "html")?;
    let mut ids: HashMap<PathBuf, HashSet<String>> = HashMap::new();
    for page in &pages {
        let text = fs::read_to_string(page)?;
        ids.insert(
            page.clone(),
            attribute_values(&text, "id").into_iter().collect(),
        );
    }
    for page in &pages {
        // mdBook's 404 page links with absolute paths from `site-url`, so that
        // it works at any depth on a web server; it is not a chapter.
        if page.file_name().is_some_and(|name| name == "404.html") {
            continue;
        }
        let text = fs::read_to_string(page)?;
        let relative_page = page
            .strip_prefix(book_out)
            .unwrap_or(page)
            .display()
            .to_string();
        let dir = page.parent().context("a page has a folder")?;
        for link in attribute_values(&text, "href")
            .into_iter()
            .chain(attribute_values(&text, "src"))
        {
            if is_external(&link) || link.contains("{{") {
                continue;
            }
            let (path_part, fragment) = match link.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (link.as_str(), None),
            };
            let path_part = path_part.split('?').next().unwrap_or_default();
            let target = if path_part.is_empty() {
                page.clone()
            } else {
                normalize(&dir.join(path_part))
            };
            let target = if target.is_dir() {
                target.join("index.html")
            } else {
                target
            };
            if !target.exists() {
                problems.add(format!("{relative_page}: broken link {link:?}"));
                continue;
            }
            // print.html rewrites every chapter's headings; mdBook owns those ids.
            let checks_fragment = !relative_page.ends_with("print.html") && !path_part.is_empty();
            if let (Some(fragment), true) = (fragment, checks_fragment)
                && !fragment.is_empty()
                && ids
                    .get(&target)
                    .is_some_and(|known| !known.contains(fragment))
            {
                problems.add(format!(
                    "{relative_page}: link {link:?} names no id in its page"
                ));
            }
        }
    }
    Ok(problems)
}

fn is_external(link: &str) -> bool {
    link.is_empty()
        || link.starts_with('#') && link.len() == 1
        || [
            "http:",
            "https:",
            "mailto:",
            "//",
            "data:",
            "javascript:",
            "tel:",
        ]
        .iter()
        .any(|prefix| link.starts_with(prefix))
}

/// Values of `name="..."` attributes, HTML entities for & decoded.
fn attribute_values(html: &str, name: &str) -> Vec<String> {
    let needle = format!(" {name}=\"");
    html.split(&needle)
        .skip(1)
        .filter_map(|piece| piece.split('"').next())
        .map(|value| value.replace("&amp;", "&"))
        .collect()
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_broken_links_and_fragments() {
        let dir = std::env::temp_dir().join(format!("xtask-links-{}", std::process::id()));
        fs::create_dir_all(dir.join("sub")).unwrap();
        fs::write(dir.join("index.html"), r#"<a href="sub/page.html#there">ok</a> <a href="gone.html">x</a> <a href="sub/page.html#nowhere">y</a> <a href="https://example.org">ext</a>"#).unwrap();
        fs::write(
            dir.join("sub/page.html"),
            r#"<h2 id="there">T</h2><img src="../index.html">"#,
        )
        .unwrap();
        let problems = check_built_book(&dir).unwrap().0;
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("gone.html") || problems[1].contains("gone.html"));
        assert!(problems.iter().any(|problem| problem.contains("#nowhere")));
        fs::remove_dir_all(dir).unwrap();
    }
}
