//! Which knob catches which shape: every downstream shape against a
//! `reqwest::Client` with no timeout, with `connect_timeout`, with
//! `read_timeout`, with `timeout` (total), and with the two-phase timeout.
//! Each cell is one POST on its own client and its own downstream; the cells
//! run side by side, and the lab's bound ends any that are still waiting.

use std::sync::Arc;

use anyhow::{Context, Result};
use lab_kit::concurrently::run_all;
use serde::Serialize;
use tokio::{sync::Barrier, time::Instant};

use crate::{
    Config,
    downstream::{Downstream, Shape},
    millis,
    two_phase::TwoPhaseError,
};

lab_kit::series! {
    /// The client settings the grid compares.
    pub enum Setting {
        NoTimeout => "no-timeout",
        ConnectTimeout => "connect_timeout",
        ReadTimeout => "read_timeout",
        TotalTimeout => "timeout",
        TwoPhase => "two-phase",
    }
}

// ANCHOR: settings
/// The client each setting uses (durations on the lab's compressed clock).
pub fn client_for(setting: Setting, config: &Config) -> Result<reqwest::Client> {
    let builder = reqwest::Client::builder().no_proxy();
    let builder = match setting {
        // reqwest's defaults: no connect, read or total timeout at all.
        Setting::NoTimeout => builder,
        Setting::ConnectTimeout => builder.connect_timeout(config.lab(config.connect_timeout_s)),
        // Restarts whenever a read completes: the wait for the head, then
        // each body chunk.
        Setting::ReadTimeout => builder.read_timeout(config.lab(config.read_timeout_s)),
        // One deadline for everything, from connect to the body's last byte.
        Setting::TotalTimeout => builder.timeout(config.lab(config.total_timeout_s)),
        // The connect deadline stays on the client; the other two phases are
        // timers the caller runs around each request (`TwoPhase`).
        Setting::TwoPhase => builder.connect_timeout(config.lab(config.connect_timeout_s)),
    };
    builder.build().context("building a reqwest client")
}
// ANCHOR_END: settings

/// One cell of the grid.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub shape: &'static str,
    pub setting: &'static str,
    /// answered | refused | connect timeout | timed out before the head |
    /// timed out in the body | error | still waiting at the bound | still
    /// reading at the bound.
    pub outcome: String,
    /// Where it ended: connect, head or body.
    pub phase: &'static str,
    /// The client gave up (or was refused) before the lab's bound.
    pub ended_by_client: bool,
    /// Time to the outcome on the lab's clock, and scaled to production.
    pub lab_ms: f64,
    pub seconds: f64,
    /// When the response head arrived (production seconds; 0 if never).
    pub head_s: f64,
    /// From the head to the outcome (production seconds; 0 if no head came):
    /// the body's share, which a body idle timeout bounds whenever the head
    /// came.
    pub after_head_s: f64,
    /// The shape's row on the chart, offset a little per setting so that
    /// points at the same time do not hide each other.
    pub row: f64,
    pub error: String,
}

/// What a cell's request ran into, before the lab bounds it.
enum Ending {
    Answered,
    Failed(&'static str, String, &'static str),
}

fn classify(error: &reqwest::Error, phase: &'static str) -> Ending {
    let text = error_chain(error);
    let outcome = if error.is_connect() && error.is_timeout() {
        "connect timeout"
    } else if error.is_connect() && text.contains("refused") {
        "refused"
    } else if error.is_timeout() && phase == "body" {
        "timed out in the body"
    } else if error.is_timeout() {
        "timed out before the head"
    } else {
        "error"
    };
    Ending::Failed(
        outcome,
        text,
        if error.is_connect() { "connect" } else { phase },
    )
}

/// An error and its sources on one line.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// One request the way `setting` sends it; `phase` tells where it is.
async fn exchange(
    shape: Shape,
    setting: Setting,
    config: &Config,
    client: &reqwest::Client,
    url: &str,
    phase: &mut &'static str,
    head_at: &mut Option<Instant>,
) -> Ending {
    // A small POST, except against the downstream that never reads: there a
    // body larger than the kernel's buffers, so the client's write blocks.
    let body_bytes = if shape == Shape::NeverReads {
        config.request_body_bytes
    } else {
        64
    };
    let body = vec![b'p'; body_bytes];
    let request = match client.post(url).body(body).build() {
        Ok(request) => request,
        Err(error) => return classify(&error, "head"),
    };
    if setting == Setting::TwoPhase {
        let two_phase = config.two_phase();
        let mut response = match two_phase.send(client, request).await {
            Ok(response) => response,
            Err(TwoPhaseError::Http(error)) => return classify(&error, "head"),
            Err(other) => {
                return Ending::Failed("timed out before the head", other.to_string(), "head");
            }
        };
        *phase = "body";
        *head_at = Some(Instant::now());
        loop {
            match two_phase.next_chunk(&mut response).await {
                Ok(Some(_)) => {}
                Ok(None) => return Ending::Answered,
                Err(TwoPhaseError::Http(error)) => return classify(&error, "body"),
                Err(other) => {
                    return Ending::Failed("timed out in the body", other.to_string(), "body");
                }
            }
        }
    }
    let mut response = match client.execute(request).await {
        Ok(response) => response,
        Err(error) => return classify(&error, "head"),
    };
    *phase = "body";
    *head_at = Some(Instant::now());
    loop {
        match response.chunk().await {
            Ok(Some(_)) => {}
            Ok(None) => return Ending::Answered,
            Err(error) => return classify(&error, "body"),
        }
    }
}

/// Runs one cell: a fresh downstream, a fresh client, one request, bounded.
pub async fn cell(shape: Shape, setting: Setting, config: &Config) -> Result<Cell> {
    cell_after(shape, setting, config, None).await
}

/// The same, but the request waits at `start` until every cell sharing it
/// has its downstream and client ready, so that setting up one cell does not
/// slow down the request of another.
pub async fn cell_after(
    shape: Shape,
    setting: Setting,
    config: &Config,
    start: Option<Arc<Barrier>>,
) -> Result<Cell> {
    let downstream = Downstream::start(shape, config.behaviour())
        .await
        .with_context(|| format!("starting the {} downstream", shape.name()))?;
    let client = client_for(setting, config)?;
    let url = downstream.url("/work");
    let bound = config.lab(config.bound_s);
    if let Some(start) = start {
        start.wait().await;
    }
    let started = Instant::now();
    let mut phase = "head";
    let mut head_at = None;
    let ended = tokio::time::timeout(
        bound,
        exchange(
            shape,
            setting,
            config,
            &client,
            &url,
            &mut phase,
            &mut head_at,
        ),
    )
    .await;
    let elapsed = started.elapsed();
    let (outcome, error, phase, ended_by_client) = match ended {
        Ok(Ending::Answered) => ("answered".to_string(), String::new(), "body", true),
        Ok(Ending::Failed(outcome, error, phase)) => (outcome.to_string(), error, phase, true),
        Err(_) if phase == "body" => (
            "still reading at the bound".to_string(),
            String::new(),
            "body",
            false,
        ),
        Err(_) => (
            "still waiting at the bound".to_string(),
            String::new(),
            "head",
            false,
        ),
    };
    drop(client);
    drop(downstream);
    let offset = Setting::ALL
        .iter()
        .position(|each| *each == setting)
        .expect("every setting is in ALL") as f64;
    Ok(Cell {
        shape: shape.name(),
        setting: setting.name(),
        outcome,
        phase,
        ended_by_client,
        lab_ms: millis(elapsed),
        seconds: millis(elapsed) * config.time_scale / 1000.0,
        row: shape.row() as f64 + (offset - 2.0) * 0.12,
        head_s: head_at.map_or(0.0, |head| config.production_s(head - started)),
        after_head_s: head_at.map_or(0.0, |head| {
            millis(elapsed) * config.time_scale / 1000.0 - config.production_s(head - started)
        }),
        error,
    })
}

/// Every cell, side by side; samples per cell in the data file, series
/// `grid/<setting>`.
pub async fn run_grid(config: &Config) -> Result<Vec<Cell>> {
    let start = Arc::new(Barrier::new(Shape::ALL.len() * Setting::ALL.len()));
    // The data file keeps a stable order: by shape, then by setting.
    let cells = Shape::ALL
        .into_iter()
        .flat_map(|shape| Setting::ALL.map(|setting| (shape, setting)));
    let done = run_all(
        cells,
        |(shape, setting)| format!("cell {} x {}", shape.name(), setting.name()),
        |(shape, setting)| {
            let (config, start) = (config.clone(), Arc::clone(&start));
            async move { cell_after(shape, setting, &config, Some(start)).await }
        },
    )
    .await?;
    Ok(done.into_iter().map(|(_, cell)| cell).collect())
}
