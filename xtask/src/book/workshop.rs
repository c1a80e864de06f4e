//! Workshops: each chapter states its minutes at the top
//! (`{{#duration reading=15 lab=5 exercises=20 quiz=5}}`), and an agenda
//! (`book/workshops/<name>.toml`, shown by `{{#agenda <name>}}`) is a list of
//! segments, each a chapter's parts (their minutes read from the chapter) or
//! a named segment with its own minutes. An agenda's segments must add up to
//! its stated length: the build and the tidy check both refuse one that
//! does not, so a page's time cannot change without its agendas following.

use std::{collections::BTreeMap, fs, path::Path};

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;

/// The parts of a chapter a facilitator plans, in the order they are run.
pub const PARTS: [&str; 4] = ["reading", "lab", "exercises", "quiz"];

/// A chapter's minutes, part by part, in [`PARTS`] order.
#[derive(Debug, Clone, PartialEq)]
pub struct Minutes(pub Vec<(String, u32)>);

impl Minutes {
    /// Reads the words after `duration`: `reading=15 lab=5 ...`.
    pub fn parse(words: &str) -> Result<Minutes> {
        let mut parts = Vec::new();
        for word in words.split_whitespace() {
            let (part, minutes) = word
                .split_once('=')
                .with_context(|| format!("{word:?}: expected part=minutes"))?;
            ensure!(
                PARTS.contains(&part),
                "{part:?} is not a part; the parts are {}",
                PARTS.join(", ")
            );
            ensure!(
                !parts.iter().any(|(known, _)| known == part),
                "{part} is given twice"
            );
            let minutes: u32 = minutes
                .parse()
                .with_context(|| format!("{word:?}: minutes are a whole number"))?;
            parts.push((part.to_string(), minutes));
        }
        ensure!(
            !parts.is_empty(),
            "usage: {{{{#duration reading=N lab=N exercises=N quiz=N}}}}"
        );
        Ok(Minutes(parts))
    }

    pub fn total(&self) -> u32 {
        self.0.iter().map(|(_, minutes)| minutes).sum()
    }

    fn of(&self, part: &str) -> Option<u32> {
        self.0
            .iter()
            .find(|(known, _)| known == part)
            .map(|(_, minutes)| *minutes)
    }

    /// The line under a chapter's title.
    pub fn render(&self) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(part, minutes)| format!("{part} {minutes}"))
            .collect();
        format!(
            "\n<p class=\"duration\">In a workshop: about {} minutes ({}, in minutes).</p>\n",
            self.total(),
            parts.join(", ")
        )
    }
}

/// Every chapter's stated minutes, with its title: from the
/// `{{#duration ...}}` of each `book/<slug>.md` that has one.
pub fn chapter_minutes(book_dir: &Path) -> Result<BTreeMap<String, (String, Minutes)>> {
    let mut found = BTreeMap::new();
    for entry in
        fs::read_dir(book_dir).with_context(|| format!("reading {}", book_dir.display()))?
    {
        let path = entry?.path();
        let (Some(slug), Some("md")) = (
            path.file_stem().and_then(|stem| stem.to_str()),
            path.extension().and_then(|extension| extension.to_str()),
        ) else {
            continue;
        };
        let text = fs::read_to_string(&path)?;
        // The first `{{#duration}}`, or the directive before it that is not
        // closed.
        let Some(duration) = super::directive::directives(&text).find(|found| {
            !found
                .as_ref()
                .is_ok_and(|directive| directive.name != "duration")
        }) else {
            continue;
        };
        let duration = duration.with_context(|| path.display().to_string())?;
        let minutes = Minutes::parse(duration.args)
            .with_context(|| format!("{}: {{{{#duration}}}}", path.display()))?;
        let title = text
            .lines()
            .find_map(|line| line.strip_prefix("# "))
            .unwrap_or(slug)
            .trim()
            .to_string();
        found.insert(slug.to_string(), (title, minutes));
    }
    Ok(found)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgendaFile {
    title: String,
    about: String,
    length: u32,
    segment: Vec<SegmentFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SegmentFile {
    page: Option<String>,
    parts: Option<Vec<String>>,
    what: Option<String>,
    minutes: Option<u32>,
}

/// An agenda with every segment's minutes worked out.
#[derive(Debug, PartialEq)]
pub struct Agenda {
    pub title: String,
    pub about: String,
    pub length: u32,
    /// (markdown label, minutes)
    pub segments: Vec<(String, u32)>,
}

impl Agenda {
    /// Reads `book/workshops/<name>.toml` and works out its minutes from the
    /// chapters; fails when a segment is malformed or when the segments do
    /// not add up to the stated length.
    pub fn load(book_dir: &Path, name: &str) -> Result<Agenda> {
        let path = book_dir.join("workshops").join(format!("{name}.toml"));
        let text =
            fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        Agenda::parse(&text, &chapter_minutes(book_dir)?)
            .with_context(|| format!("book/workshops/{name}.toml"))
    }

    fn parse(text: &str, chapters: &BTreeMap<String, (String, Minutes)>) -> Result<Agenda> {
        let file: AgendaFile = toml::from_str(text)?;
        let mut segments = Vec::new();
        for (index, segment) in file.segment.iter().enumerate() {
            let number = index + 1;
            let row = match segment {
                SegmentFile {
                    page: Some(page),
                    parts: Some(parts),
                    what: None,
                    minutes: None,
                } => {
                    let (title, minutes) = chapters.get(page).with_context(|| {
                        format!("segment {number}: book/{page}.md has no {{{{#duration}}}}")
                    })?;
                    let mut sum = 0;
                    for part in parts {
                        sum += minutes.of(part).with_context(|| {
                            format!("segment {number}: book/{page}.md states no {part} minutes")
                        })?;
                    }
                    (
                        format!("[{title}](../{page}.md): {}", parts.join(", ")),
                        sum,
                    )
                }
                SegmentFile {
                    page: None,
                    parts: None,
                    what: Some(what),
                    minutes: Some(minutes),
                } => (what.clone(), *minutes),
                _ => bail!("segment {number}: give either page and parts, or what and minutes"),
            };
            segments.push(row);
        }
        let sum: u32 = segments.iter().map(|(_, minutes)| minutes).sum();
        ensure!(
            sum == file.length,
            "the segments add up to {sum} minutes, not the stated {}",
            file.length
        );
        Ok(Agenda {
            title: file.title,
            about: file.about,
            length: file.length,
            segments,
        })
    }

    /// The agenda's page body: its paragraph, then a table with each
    /// segment's start, minutes and what it is.
    pub fn render(&self) -> String {
        let mut text = format!(
            "\n{}\n\n| starts at | minutes | segment |\n|--:|--:|:--|\n",
            self.about
        );
        let mut start = 0;
        for (label, minutes) in &self.segments {
            text.push_str(&format!(
                "| {}:{:02} | {minutes} | {} |\n",
                start / 60,
                start % 60,
                label.replace('|', "\\|")
            ));
            start += minutes;
        }
        text.push_str(&format!(
            "| | **{}** | **total: {} h {:02} min** |\n",
            self.length,
            self.length / 60,
            self.length % 60
        ));
        text
    }
}

/// Every agenda in `book/workshops/`, by name.
pub fn agenda_names(book_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(book_dir.join("workshops"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".toml").map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chapters() -> BTreeMap<String, (String, Minutes)> {
        let minutes = Minutes::parse("reading=15 lab=5 exercises=20 quiz=5").unwrap();
        BTreeMap::from([("demo".to_string(), ("Demo".to_string(), minutes))])
    }

    const AGENDA: &str = r#"
title = "t"
about = "a"
length = 40
[[segment]]
page = "demo"
parts = ["reading", "lab", "quiz"]
[[segment]]
what = "Break"
minutes = 15
"#;

    #[test]
    fn a_chapters_minutes_are_read_and_summed() {
        let minutes = Minutes::parse("reading=15 lab=5 exercises=20 quiz=5").unwrap();
        assert_eq!(minutes.total(), 45);
        assert!(
            minutes
                .render()
                .contains("about 45 minutes (reading 15, lab 5")
        );
        for (bad, says) in [
            ("reading=x", "whole number"),
            ("talk=5", "not a part"),
            ("lab=1 lab=2", "twice"),
            ("", "usage"),
        ] {
            let error = Minutes::parse(bad).unwrap_err().to_string();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn an_agenda_takes_its_minutes_from_the_chapters_and_must_add_up() {
        let agenda = Agenda::parse(AGENDA, &chapters()).unwrap();
        assert_eq!(
            agenda.segments[0],
            ("[Demo](../demo.md): reading, lab, quiz".into(), 25)
        );
        let table = agenda.render();
        assert!(table.contains("| 0:25 | 15 | Break |"), "{table}");
        assert!(table.contains("total: 0 h 40 min"), "{table}");
        let off = AGENDA.replace("length = 40", "length = 45");
        let error = format!("{:#}", Agenda::parse(&off, &chapters()).unwrap_err());
        assert!(
            error.contains("add up to 40 minutes, not the stated 45"),
            "{error}"
        );
        let unknown = AGENDA.replace("\"demo\"", "\"other\"");
        let error = format!("{:#}", Agenda::parse(&unknown, &chapters()).unwrap_err());
        assert!(error.contains("book/other.md has no"), "{error}");
    }
}
