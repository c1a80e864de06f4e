//! The experiment: every stalled client against every server setup, all at
//! once, each connection watched for the same window; and, in full mode,
//! hyper's own default watched in real time.

use std::time::Duration;

use anyhow::Result;
use lab_kit::{Output, Series, concurrently::run_all};
use serde::Serialize;

use crate::{
    Config,
    servers::ServerSetup,
    stalled_client::{StalledClient, WatchOutcome, watch},
};

/// What a server did with one stalled connection over the window: the
/// summary `<setup>/<client>` the chapter's table reads.
#[derive(Debug, Clone, Serialize)]
pub struct StalledConnection {
    pub server: String,
    pub client: String,
    /// `still open`, `closed`, `reset`, `answered 503, kept open`, ...
    pub verdict: String,
    /// When the server first acted (answered or closed), lab ms; the window
    /// when it did nothing.
    pub after_ms: f64,
    /// `after_ms` at production scale, seconds.
    pub at_production_s: f64,
    /// The connection was still open when the window ended.
    pub still_open: bool,
    /// When the server closed the connection, production seconds; the
    /// window when it did not.
    pub closed_at_production_s: f64,
    pub window_ms: f64,
    /// What the server was configured with, production seconds (0: nothing).
    pub configured_s: f64,
    /// The same for a reader: `none` for no timeout at all, else seconds.
    pub configured: String,
    /// When the server closed the connection, for a reader: seconds, or
    /// `still open at N s` (the end of the window) when it never did.
    pub closed_at: String,
    /// The `Keep-Alive` header of the idle client's answer, or `none`.
    pub advertised: String,
}

/// One connection's life as the chart draws it: a bar from the moment the
/// client stalled to the moment the server closed it (or the window ended),
/// on the client's row, in the setup's colour (the sample `<setup>`).
#[derive(Debug, Clone, Serialize)]
struct ConnectionLife {
    client: String,
    row: u8,
    start_s: f64,
    end_s: f64,
    still_open: bool,
    verdict: String,
}

/// The summary of one watched connection; `to_production_s` turns the lab's
/// milliseconds into production seconds.
fn stalled_connection(
    setup: &ServerSetup,
    client: StalledClient,
    outcome: WatchOutcome,
    window: Duration,
    configured_s: Option<f64>,
    to_production_s: impl Fn(f64) -> f64,
) -> StalledConnection {
    let window_ms = window.as_secs_f64() * 1000.0;
    let after_ms = outcome.first_action_ms().unwrap_or(window_ms);
    let (configured, closed_at) = lab_kit::time::close_in_words(
        configured_s,
        outcome.closed.map(|(_, at)| to_production_s(at)),
        to_production_s(window_ms),
    );
    StalledConnection {
        server: setup.series(),
        client: client.series(),
        verdict: outcome.verdict(),
        after_ms,
        at_production_s: to_production_s(after_ms),
        still_open: outcome.closed.is_none(),
        closed_at_production_s: to_production_s(outcome.closed.map_or(window_ms, |(_, at)| at)),
        window_ms,
        configured_s: configured_s.unwrap_or(0.0),
        configured,
        closed_at,
        advertised: outcome.advertised.unwrap_or_else(|| "none".into()),
    }
}

/// Every client against every setup, all at once: one summary per
/// connection, and one sample per connection for the chart.
pub async fn server_defaults(config: &Config, out: &mut Output) -> Result<()> {
    let window = config.lab(config.window_s);
    let mut servers = Vec::new();
    let mut cells = Vec::new();
    for setup in config.setups() {
        let server = setup.spawn().await?;
        for client in StalledClient::ALL {
            cells.push((setup, client, server.addr()));
        }
        servers.push(server);
    }
    let series_of = |setup: &ServerSetup, client: StalledClient| {
        format!("{}/{}", setup.series(), client.series())
    };
    // In the order of the setups, then of the clients, whatever order they ended in.
    let watched = run_all(
        cells,
        |(setup, client, _)| series_of(setup, *client),
        |(_, client, addr)| watch(addr, client, window),
    )
    .await?;
    drop(servers);
    let mut lives = Vec::new();
    for ((setup, client, _), outcome) in watched {
        let name = series_of(&setup, client);
        let summary = stalled_connection(
            &setup,
            client,
            outcome,
            window,
            config.configured_s(&setup),
            |lab_ms| config.production_s(lab_ms),
        );
        lives.push((
            setup.series(),
            ConnectionLife {
                client: summary.client.clone(),
                row: client.row(),
                start_s: 0.0,
                end_s: summary.closed_at_production_s,
                still_open: summary.still_open,
                verdict: summary.verdict.clone(),
            },
        ));
        out.write_summary(&name, &summary)?;
    }
    for (series, life) in &lives {
        out.write_sample(series, life)?;
    }
    Ok(())
}

/// Full mode only: an idle connection to hyper with nothing configured,
/// watched in real time for `real_default_window_s`, so that one row checks
/// hyper's 30 s default itself and not a compressed copy. `None` in quick mode.
pub async fn real_time_default(config: &Config) -> Result<Option<StalledConnection>> {
    if config.real_default_window_s <= 0.0 {
        return Ok(None);
    }
    let window = Duration::from_secs_f64(config.real_default_window_s);
    let setup = ServerSetup::HyperDefault;
    let server = setup.spawn().await?;
    let outcome = watch(server.addr(), StalledClient::Idle, window).await?;
    // Real time: production seconds are lab seconds in this row.
    let mut row = stalled_connection(&setup, StalledClient::Idle, outcome, window, None, |ms| {
        ms / 1000.0
    });
    row.configured = "hyper's default".into();
    Ok(Some(row))
}
