//! The server's event log, on the clock the lab reads too.
//!
//! The lab and the server it runs are different processes, so `Instant`s
//! cannot cross between them. Both read CLOCK_MONOTONIC instead
//! ([`lab_kit::clock::monotonic_ms`]): the same clock for every process on the
//! machine, so the server's "SIGTERM received" and the lab's "request
//! started" land on one timeline.

use std::{
    fs::{File, OpenOptions},
    io::Write,
    path::Path,
    sync::{Arc, Mutex},
};

use anyhow::{Context, Result};
use lab_kit::clock::monotonic_ms;
use serde::{Deserialize, Serialize};

/// One line of the server's event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub event: String,
    /// CLOCK_MONOTONIC, milliseconds.
    pub t_ms: f64,
    /// A number that goes with the event (a port, a count), or 0.
    #[serde(default)]
    pub value: f64,
}

/// Appends events to a file, one JSON line each, written straight through
/// (no buffer) so a process that is killed leaves every line it logged.
#[derive(Clone, Default)]
pub struct EventLog {
    file: Option<Arc<Mutex<File>>>,
}

impl EventLog {
    /// Logs to `path`, or nowhere for `None`.
    pub fn open(path: Option<&Path>) -> Result<EventLog> {
        let file = match path {
            Some(path) => Some(Arc::new(Mutex::new(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .with_context(|| format!("opening the event log {}", path.display()))?,
            ))),
            None => None,
        };
        Ok(EventLog { file })
    }

    pub fn log(&self, event: &str) {
        self.log_value(event, 0.0);
    }

    pub fn log_value(&self, event: &str, value: f64) {
        let Some(file) = &self.file else { return };
        let line = Event {
            event: event.to_string(),
            t_ms: monotonic_ms(),
            value,
        };
        if let Ok(mut text) = serde_json::to_string(&line) {
            text.push('\n');
            // A poisoned lock still guards a usable file; a failed write
            // loses one line of evidence, which the lab then reports missing.
            let mut file = file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let _ = file.write_all(text.as_bytes());
        }
    }
}

/// Reads an event log; a torn last line (the process died mid-write) is skipped.
pub fn read_events(path: &Path) -> Result<Vec<Event>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect())
}

/// The first event with this name.
pub fn first<'a>(events: &'a [Event], name: &str) -> Option<&'a Event> {
    events.iter().find(|event| event.event == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_and_torn_lines_are_skipped() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("events.jsonl");
        let log = EventLog::open(Some(&path)).expect("log opens");
        log.log("sigterm");
        log.log_value("listening", 8080.0);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(b"{\"event\":\"tor"))
            .expect("append");
        let events = read_events(&path).expect("readable");
        assert_eq!(events.len(), 2);
        assert_eq!(
            first(&events, "listening").map(|event| event.value),
            Some(8080.0)
        );
        assert!(events[0].t_ms <= events[1].t_ms);
    }
}
