//! Experiment 4, the same race from a Rust client's pool: reqwest (90 s pool
//! idle by default) reuses a connection to a backend that closes idle ones
//! sooner, straight on loopback and across the link delay.

use std::time::Duration;

use anyhow::{Context, Result};
use lab_kit::{Output, Series};
use serde::Serialize;

use crate::{Config, backend::Backend, join_all, link_delay::LinkDelay};

/// One reused request from a reqwest client after a gap.
#[derive(Debug, Clone, Serialize)]
pub struct ReqwestSample {
    pub gap_ms: f64,
    pub gap_production_s: f64,
    pub gap_over_idle: f64,
    pub reused_ok: u8,
    /// The innermost error message, or `ok`.
    pub error: String,
}

/// The innermost cause of an error chain, as text.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(source) = current.source() {
        current = source;
    }
    current.to_string()
}

/// reqwest (90 s pool idle by default) against a backend that closes idle
/// connections after `idle`: request, wait, request on the pooled connection.
async fn reqwest_after(url: String, gap: Duration) -> Result<Option<String>> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .context("building a reqwest client")?;
    lab_kit::client::get_body(&client, &url, "request 1").await?;
    tokio::time::sleep(gap).await;
    let second = async { client.get(&url).send().await?.bytes().await };
    Ok(match second.await {
        Ok(_) => None,
        Err(error) => Some(root_cause(&error)),
    })
}

lab_kit::series! {
    /// How the reqwest client reaches the backend.
    pub enum ReqwestPath in "reqwest" {
        /// Straight to the backend on loopback: a FIN arrives in microseconds.
        Direct => "direct",
        /// Through the link-delay shim: a FIN takes one link delay to arrive.
        LinkDelay => "link-delay",
    }
}

/// reqwest straight to the backend, and through the link delay.
pub async fn reqwest_race(config: &Config, out: &mut Output) -> Result<()> {
    let idle = config.lab(config.backend_below_idle_s);
    let delay = config.link_delay();
    // Gaps from half the idle timeout to past the race window.
    let steps = 16;
    let first = idle.mul_f64(0.5);
    let last = idle + delay * 3;
    let gaps: Vec<Duration> = (0..steps)
        .map(|step| first + (last - first).mul_f64(step as f64 / (steps - 1) as f64))
        .collect();
    for path in [ReqwestPath::Direct, ReqwestPath::LinkDelay] {
        let series = path.series();
        let backend = Backend::spawn(config.hyper_below()).await?;
        let link = LinkDelay::spawn(backend.addr, delay).await?;
        let (target, link_delay_ms) = match path {
            ReqwestPath::Direct => (backend.addr, 0.0),
            ReqwestPath::LinkDelay => (link.addr, config.link_delay_ms),
        };
        let url = format!("http://{target}/");
        let results = join_all(gaps.iter().map(|&gap| {
            let url = url.clone();
            async move { (gap, reqwest_after(url, gap).await) }
        }))
        .await;
        let (mut errors, mut example) = (0u64, String::from("none"));
        for (gap, result) in results {
            let error = result.with_context(|| format!("{series}, gap {gap:?}"))?;
            if let Some(text) = &error {
                errors += 1;
                example = text.clone();
            }
            out.write_sample(
                &series,
                &ReqwestSample {
                    gap_ms: gap.as_secs_f64() * 1000.0,
                    gap_production_s: gap.as_secs_f64() * config.time_scale,
                    gap_over_idle: gap.as_secs_f64() / idle.as_secs_f64(),
                    reused_ok: u8::from(error.is_none()),
                    error: error.unwrap_or_else(|| "ok".into()),
                },
            )?;
        }
        #[derive(Serialize)]
        struct ReqwestSummary {
            requests: usize,
            errors: u64,
            error: String,
            link_delay_ms: f64,
        }
        out.write_summary(
            &series,
            &ReqwestSummary {
                requests: gaps.len(),
                errors,
                error: example,
                link_delay_ms,
            },
        )?;
    }
    Ok(())
}
