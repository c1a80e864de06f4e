//! Reading a lab's data file back: every line parsed and checked, errors
//! naming the file and the line, never a panic.

use std::{fs, path::Path};

use anyhow::{Result, anyhow, bail};
use lab_kit::record::{Meta, Point, Record, parse_line};

use lab_kit::exit::bad_input;

/// One lab run, as read from `<slug>.jsonl`.
#[derive(Debug, Clone)]
pub struct RunData {
    pub meta: Meta,
    pub samples: Vec<Point>,
    pub summaries: Vec<Point>,
}

impl RunData {
    /// A data file is the command's input, so what is wrong with it is a
    /// usage error (exit 2), as a bad argument is.
    pub fn load(path: &Path) -> Result<RunData> {
        let bytes = fs::read(path)
            .map_err(|error| bad_input(format!("reading {}: {error}", path.display())))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| bad_input(format!("{}: not UTF-8 text", path.display())))?;
        Self::parse(&text).map_err(|error| bad_input(format!("{}:{error:#}", path.display())))
    }

    /// Parses a whole file; errors start with the line number.
    pub fn parse(text: &str) -> Result<RunData> {
        if !text.is_empty() && !text.ends_with('\n') {
            let last = text.lines().count();
            bail!("{last}: the file ends in the middle of a line (truncated?)");
        }
        let mut meta = None;
        let (mut samples, mut summaries) = (Vec::new(), Vec::new());
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            let record =
                parse_line(line).map_err(|error| anyhow!("{number}: invalid record: {error:#}"))?;
            match (record, number) {
                (Record::Meta(found), 1) => meta = Some(*found),
                (Record::Meta(_), _) => bail!("{number}: a second meta record"),
                (_, 1) => bail!("1: the first record must be meta"),
                (Record::Sample(point), _) => samples.push(point),
                (Record::Summary(point), _) => summaries.push(point),
            }
        }
        let meta = meta.ok_or_else(|| anyhow!("1: the file is empty"))?;
        if samples.is_empty() && summaries.is_empty() {
            bail!("{}: a meta record and no results", text.lines().count());
        }
        Ok(RunData {
            meta,
            samples,
            summaries,
        })
    }

    pub fn points(&self, kind: PointKind) -> &[Point] {
        match kind {
            PointKind::Sample => &self.samples,
            PointKind::Summary => &self.summaries,
        }
    }

    /// The caption for a chart or table fed by this run: a measurement names
    /// its mode, time scale, date and machine; a seeded simulation runs on
    /// simulated time, so neither the time scale nor the machine matter.
    pub fn caption_for(&self, clock: Clock) -> String {
        self.caption_at(clock, self.meta.time_scale)
    }

    /// The caption of a part that ran on a clock of its own, compressed
    /// `time_scale` times (its rows say so; `{{#table ... clock=rows}}`).
    pub fn caption_at(&self, clock: Clock, time_scale: f64) -> String {
        // A run with changed settings says so first: its numbers are not the
        // lab's own settings'.
        let set = if self.meta.set.is_empty() {
            String::new()
        } else {
            format!("with {} set, ", self.meta.set.join(", "))
        };
        format!("{set}{}", self.plain_caption(clock, time_scale))
    }

    fn plain_caption(&self, clock: Clock, time_scale: f64) -> String {
        let date = self.meta.started.get(..10).unwrap_or(&self.meta.started);
        if clock == Clock::Simulated {
            return format!(
                "simulation (seeded, simulated time), {} mode, {date}",
                self.meta.mode
            );
        }
        let real_time = clock == Clock::RealTime;
        let scale = if real_time || (time_scale - 1.0).abs() < f64::EPSILON {
            String::from("real time")
        } else {
            format!(
                "time compressed {}x",
                lab_kit::Value::Num(time_scale).display()
            )
        };
        format!(
            "{} mode, {scale}, {date}, {}",
            self.meta.mode,
            self.meta.machine.caption()
        )
    }
}

/// What clock the numbers of a chart or table ran on: the lab's real (maybe
/// compressed) clock, the machine's clock uncompressed (a part of a lab that
/// runs in real time whatever the lab's time scale), or a seeded
/// simulation's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Clock {
    #[default]
    Measured,
    RealTime,
    Simulated,
    /// A table's part ran on a clock of its own: each row carries its
    /// `time_scale`, and the caption gives it (tables only).
    Rows,
}

/// Which records a chart or table reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PointKind {
    Sample,
    Summary,
}

impl std::str::FromStr for PointKind {
    type Err = anyhow::Error;
    fn from_str(text: &str) -> Result<PointKind> {
        match text {
            "sample" => Ok(PointKind::Sample),
            "summary" => Ok(PointKind::Summary),
            other => bail!("unknown record kind {other:?} (expected sample or summary)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const META: &str = r#"{"type":"meta","data":{"lab":"demo","mode":"quick","started":"2026-11-29T18:00:00Z","time_scale":50.0,"params":{},"machine":{"cpu":"Test CPU","cores":2,"os":"linux","kernel":"6.1","rustc":"rustc 1","crates":{}}}}"#;
    const SUMMARY: &str = r#"{"type":"summary","data":{"series":"a","values":{"n":1}}}"#;

    #[test]
    fn reads_a_good_file() {
        let run = RunData::parse(&format!("{META}\n{SUMMARY}\n")).unwrap();
        assert_eq!(run.summaries.len(), 1);
        assert_eq!(
            run.caption_for(Clock::Measured),
            "quick mode, time compressed 50x, 2026-11-29, Test CPU (2 cores), Linux 6.1"
        );
        assert_eq!(
            run.caption_for(Clock::RealTime),
            "quick mode, real time, 2026-11-29, Test CPU (2 cores), Linux 6.1"
        );
        assert_eq!(
            run.caption_for(Clock::Simulated),
            "simulation (seeded, simulated time), quick mode, 2026-11-29"
        );
        let set = META.replace(
            r#""params":{}"#,
            r#""params":{},"set":["in_flight=5","requests=50"]"#,
        );
        let run = RunData::parse(&format!("{set}\n{SUMMARY}\n")).unwrap();
        assert_eq!(
            run.caption_for(Clock::Measured),
            "with in_flight=5, requests=50 set, quick mode, time compressed 50x, 2026-11-29, Test CPU (2 cores), Linux 6.1"
        );
    }

    #[test]
    fn names_the_line_that_is_wrong() {
        let truncated = format!("{META}\n{}", &SUMMARY[..20]);
        assert!(format!("{:#}", RunData::parse(&truncated).unwrap_err()).starts_with("2: "));
        let corrupt = format!("{META}\n{SUMMARY}\n{{\"type\":\"summary\"}}\n");
        let message = format!("{:#}", RunData::parse(&corrupt).unwrap_err());
        assert!(message.starts_with("3: invalid record"), "{message}");
        assert!(RunData::parse("").is_err());
        assert!(RunData::parse(&format!("{META}\n")).is_err());
        assert!(RunData::parse(&format!("{SUMMARY}\n")).is_err());
    }

    #[test]
    fn names_the_file_too() {
        let dir = std::env::temp_dir().join(format!("xtask-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("demo.jsonl");
        std::fs::write(&path, format!("{META}\nnot json\n")).unwrap();
        let error = RunData::load(&path).unwrap_err();
        let message = format!("{error:#}");
        assert!(
            message.contains("demo.jsonl:2: invalid record"),
            "{message}"
        );
        assert!(
            lab_kit::exit::is_bad_input(&error),
            "a corrupt data file is bad input (exit 2): {message}"
        );
        let missing = RunData::load(&dir.join("none.jsonl")).unwrap_err();
        assert!(lab_kit::exit::is_bad_input(&missing));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
