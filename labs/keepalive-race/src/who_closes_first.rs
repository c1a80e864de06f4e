//! Experiment 1, who closes first: a naive client reuses a connection after a
//! gap, against hyper with a timer and against `axum::serve`, while the probe
//! measures when each server really closes an idle connection.

use std::{net::SocketAddr, time::Duration};

use anyhow::{Context, Result};
use lab_kit::{Output, Series};
use serde::Serialize;

use crate::{
    Config,
    backend::{Backend, BackendKind},
    join_all,
    probe::{IdleProbeConfig, probe},
    wire::{Wire, WireError, get_request},
};

/// What the naive client saw when it reused a connection after a gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reuse {
    /// The second request got a response.
    Ok,
    /// The server had closed the connection (EOF instead of a response).
    Closed,
    /// The server reset the connection.
    Reset,
}

// ANCHOR: naive
/// A naive pooling client: request 1, wait `gap`, request 2 on the same
/// socket. It ignores any `Keep-Alive: timeout=` hint, as load balancers do.
/// Returns the second request's fate and the first response's hint.
pub async fn reuse_after(addr: SocketAddr, gap: Duration) -> Result<(Reuse, Option<String>)> {
    let mut wire = Wire::connect(addr, Duration::from_secs(2))
        .await
        .context("connecting")?;
    wire.send(&get_request("/", "lab"))
        .await
        .context("sending request 1")?;
    let first = wire
        .read_response("GET")
        .await
        .context("reading response 1")?;
    let hint = first.header("keep-alive").map(str::to_string);
    tokio::time::sleep(gap).await;
    // Writing into a connection the server has closed usually succeeds: the
    // bytes leave, the server's kernel answers with RST. The failure shows
    // up on the read, as EOF (the FIN) or as a reset.
    let second = async {
        wire.send(&get_request("/", "lab")).await?;
        wire.read_response("GET").await
    };
    let outcome = match tokio::time::timeout(Duration::from_secs(5), second).await {
        Ok(Ok(_)) => Reuse::Ok,
        Ok(Err(WireError::Closed { .. })) => Reuse::Closed,
        Ok(Err(WireError::Reset)) => Reuse::Reset,
        Ok(Err(other)) => return Err(other).context("reading response 2"),
        Err(_) => anyhow::bail!("no answer to request 2 within 5 s"),
    };
    Ok((outcome, hint))
}
// ANCHOR_END: naive

#[derive(Debug, Clone, Serialize)]
struct GapSample {
    gap_ms: f64,
    /// The gap at production scale, seconds.
    gap_production_s: f64,
    gap_over_idle: f64,
    outcome: Reuse,
    /// 1 when the second request was answered, 0 when it failed.
    reused_ok: u8,
}

/// When a server closed an idle connection, as the probe measured it.
#[derive(Debug, Clone, Serialize)]
pub struct IdleClose {
    pub server: String,
    /// `closed`, `reset` or `still open`.
    pub verdict: String,
    /// When the server closed the idle connection, lab ms; the window when it
    /// did not.
    pub after_ms: f64,
    /// `after_ms` at production scale, seconds.
    pub at_production_s: f64,
    /// The connection was still open when the window ended.
    pub still_open: bool,
    pub window_ms: f64,
    /// What the server was configured with, production seconds (0: nothing).
    pub configured_s: f64,
    /// The same for a reader: `none` for no timeout at all, else seconds.
    pub configured: String,
    /// When the server closed the connection, for a reader: seconds, or
    /// `still open at N s` (the end of the window) when it never did.
    pub closed_at: String,
    /// The server's `Keep-Alive` header, or `none`.
    pub advertised: String,
}

/// The naive client against hyper (idle timeout = hyper's default,
/// compressed) and `axum::serve`, plus the measured close time of each.
pub async fn who_closes_first(config: &Config, out: &mut Output) -> Result<()> {
    let idle = config.lab(config.backend_below_idle_s);
    let servers = [
        (config.hyper_below(), Some(config.backend_below_idle_s)),
        (BackendKind::AxumServe, None),
    ];
    for (kind, configured_s) in servers {
        let name = kind.series();
        let backend = Backend::spawn(kind).await?;
        let window = config.lab(config.window_s);
        // The close time and every gap run at once, each on its own connection.
        let probe_config = IdleProbeConfig::new(backend.addr, window);
        let close = probe(&probe_config);
        let gaps = join_all(config.gap_factors.iter().map(|&factor| {
            let gap = idle.mul_f64(factor);
            let addr = backend.addr;
            async move { (factor, gap, reuse_after(addr, gap).await) }
        }));
        let (close, gaps) = tokio::join!(close, gaps);
        let close = close.with_context(|| format!("measuring when {name} closes"))?;
        let mut hint = None;
        for (factor, gap, outcome) in gaps {
            let (outcome, seen_hint) =
                outcome.with_context(|| format!("{name}: reuse after {gap:?}"))?;
            hint = hint.or(seen_hint);
            out.write_sample(
                &format!("gap/{name}"),
                &GapSample {
                    gap_ms: gap.as_secs_f64() * 1000.0,
                    gap_production_s: gap.as_secs_f64() * config.time_scale,
                    gap_over_idle: factor,
                    outcome,
                    reused_ok: u8::from(outcome == Reuse::Ok),
                },
            )?;
        }
        let after_ms = close.closed_after_ms.unwrap_or(close.window_ms);
        let (configured, closed_at) = lab_kit::time::close_in_words(
            configured_s,
            close.closed_after_ms.map(|ms| config.production_s(ms)),
            config.production_s(close.window_ms),
        );
        out.write_summary(
            &format!("close/{name}"),
            &IdleClose {
                server: name.clone(),
                verdict: close.how.unwrap_or("still open").into(),
                after_ms,
                at_production_s: config.production_s(after_ms),
                still_open: close.closed_after_ms.is_none(),
                window_ms: close.window_ms,
                configured_s: configured_s.unwrap_or(0.0),
                configured,
                closed_at,
                advertised: hint.unwrap_or_else(|| "none".into()),
            },
        )?;
        eprintln!(
            "keepalive-race: {name} closed an idle connection: {}",
            close
                .closed_after_ms
                .map(|millis| format!("after {millis:.0} ms"))
                .unwrap_or_else(|| "not within the window".into())
        );
    }
    Ok(())
}
