//! Where a lab's records go while it runs ([`Output`]): stdout for the
//! xtask, and a copy in memory for the labs' tests, which also read it back.

use std::io::{self, Write};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::record::{Meta, Point, Record, check, to_fields};

/// Where a lab's records go: stdout (flushed a line at a time, so the xtask
/// sees progress and a killed lab leaves whole lines), and a copy in memory so
/// tests can call a lab's `run` directly and look at what it measured.
pub struct Output {
    sink: Option<Box<dyn Write + Send>>,
    records: Vec<Record>,
    /// What `--set` changed, written into the meta record.
    set: Vec<String>,
    /// `--name`, written into the meta record.
    name: Option<String>,
}

impl Output {
    /// Records go to stdout and are kept.
    pub fn stdout() -> Self {
        Output {
            sink: Some(Box::new(io::stdout())),
            records: Vec::new(),
            set: Vec::new(),
            name: None,
        }
    }

    /// Records are only kept; for tests.
    pub fn collect() -> Self {
        Output {
            sink: None,
            records: Vec::new(),
            set: Vec::new(),
            name: None,
        }
    }

    /// Runs one part of a lab (`run(config, out)`) into an output that only
    /// keeps its records; for the labs' tests of one experiment.
    pub async fn collect_part<C>(
        config: &C,
        run: impl AsyncFnOnce(&C, &mut Output) -> Result<()>,
    ) -> Result<Output> {
        let mut out = Output::collect();
        run(config, &mut out).await?;
        Ok(out)
    }

    /// Everything written so far.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// The summary of one series, if the run wrote one.
    pub fn summary(&self, series: &str) -> Option<&Point> {
        self.records.iter().find_map(|record| match record {
            Record::Summary(point) if point.series == series => Some(point),
            _ => None,
        })
    }

    /// The run's meta record, if it wrote one first.
    pub fn meta(&self) -> Option<&Meta> {
        match self.records.first() {
            Some(Record::Meta(meta)) => Some(&**meta),
            _ => None,
        }
    }

    /// Every sample of one series, in order.
    pub fn samples<'a>(&'a self, series: &'a str) -> impl Iterator<Item = &'a Point> + 'a {
        self.records.iter().filter_map(move |record| match record {
            Record::Sample(point) if point.series == series => Some(point),
            _ => None,
        })
    }

    /// Writes the run's meta record (read back with [`Output::meta`]); what
    /// `--set` changed goes into it.
    pub fn write_meta(&mut self, mut meta: Meta) -> Result<()> {
        if meta.set.is_empty() {
            meta.set = self.set.clone();
        }
        if meta.name.is_none() {
            meta.name = self.name.clone();
        }
        self.write(Record::Meta(Box::new(meta)))
    }

    /// Records the name the reader gave this machine (`--name`).
    pub fn with_name(mut self, name: Option<String>) -> Self {
        self.name = name;
        self
    }

    /// Records that this run's settings were changed by `--set`.
    pub fn with_settings(mut self, settings: &crate::Settings) -> Self {
        self.set = settings.words();
        self
    }

    /// Writes one sample of `series` (read back with [`Output::samples`]).
    pub fn write_sample(&mut self, series: &str, values: &impl Serialize) -> Result<()> {
        let point = Point {
            series: series.to_string(),
            values: to_fields(values)?,
        };
        self.write(Record::Sample(point))
    }

    /// Writes the summary of `series` (read back with [`Output::summary`]).
    pub fn write_summary(&mut self, series: &str, values: &impl Serialize) -> Result<()> {
        let point = Point {
            series: series.to_string(),
            values: to_fields(values)?,
        };
        self.write(Record::Summary(point))
    }

    /// Writes one summary per `(series, values)` row, in order.
    pub fn write_summaries<S: AsRef<str>, T: Serialize>(&mut self, rows: &[(S, T)]) -> Result<()> {
        for (series, values) in rows {
            self.write_summary(series.as_ref(), values)?;
        }
        Ok(())
    }

    /// Writes the samples and summaries of `part` (an [`Output::collect`] a
    /// part of the lab ran into), in order, and not its meta record: a lab
    /// that runs its parts in another order than it reports them keeps its
    /// records in the order of its chapter.
    pub fn append(&mut self, part: &Output) -> Result<()> {
        for record in part.records() {
            match record {
                Record::Sample(point) => self.write_sample(&point.series, &point.values)?,
                Record::Summary(point) => self.write_summary(&point.series, &point.values)?,
                Record::Meta(_) => {}
            }
        }
        Ok(())
    }

    fn write(&mut self, record: Record) -> Result<()> {
        check(&record)?;
        if let Some(sink) = self.sink.as_mut() {
            let line = serde_json::to_string(&record).context("encoding a record")?;
            writeln!(sink, "{line}").context("writing a record to stdout")?;
            sink.flush().context("flushing stdout")?;
        }
        self.records.push(record);
        Ok(())
    }
}
