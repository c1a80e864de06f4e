//! The reused-connection trap: a client talks to its upstream through a
//! tunnel that keeps the client's connection open when the upstream dies.
//! The four-step check runs against three timeout policies: none, a timer
//! armed only when a connection is made (the anti-pattern), and the
//! two-phase timeout.
//!
//! 1. a request succeeds (new connection);
//! 2. an immediate second request succeeds (the pool reuses the connection);
//! 3. the upstream is killed; the next request must fail after the TTFB
//!    timeout rather than hang;
//! 4. the upstream restarts; the next request succeeds.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use anyhow::{Context as _, Result};
use lab_kit::{Output, Series, concurrently::run_all};
use serde::Serialize;
use tokio::{sync::watch, time::Instant};

use crate::{
    Config,
    downstream::{Downstream, Shape},
    grid::error_chain,
    millis,
    tunnel::Tunnel,
    two_phase::TwoPhaseError,
};

lab_kit::series! {
    /// The timeout policies of the check.
    pub enum Policy {
        NoTimeout => "no-timeout",
        ConnectArmed => "timer-on-connect",
        TwoPhase => "two-phase",
    }
}

// ANCHOR: connect_armed
/// The anti-pattern, rebuilt in Rust: a TTFB timer that is armed when the
/// client makes a new connection, and at no other time.
///
/// reqwest runs code on connect through a connector layer, so that half can
/// be written. The other half of the usual JavaScript version, "a reused
/// socket was assigned to this request, start the timer now", cannot: the
/// pool never tells the caller which connection a request got, and the
/// connection type a reqwest connector returns is sealed, so the layer
/// cannot put a read deadline on the socket either. What is left is exactly
/// the bug: a timer tied to connecting, not to the request.
#[derive(Clone)]
pub struct CountConnects {
    connects: Arc<watch::Sender<u64>>,
}

impl<S> tower::Layer<S> for CountConnects {
    type Service = CountConnectsService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        CountConnectsService {
            inner,
            connects: Arc::clone(&self.connects),
        }
    }
}

#[derive(Clone)]
pub struct CountConnectsService<S> {
    inner: S,
    connects: Arc<watch::Sender<u64>>,
}

type BoxedFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, Target> tower::Service<Target> for CountConnectsService<S>
where
    S: tower::Service<Target>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxedFuture<S::Response, S::Error>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, target: Target) -> Self::Future {
        let connecting = self.inner.call(target);
        let connects = Arc::clone(&self.connects);
        Box::pin(async move {
            let connection = connecting.await?;
            // The 'connect' event: whoever waits on the watch arms a timer.
            connects.send_modify(|count| *count += 1);
            Ok(connection)
        })
    }
}

/// A client whose connects arm the timer, and the sender they notify.
pub fn connect_armed_client() -> Result<(reqwest::Client, Arc<watch::Sender<u64>>)> {
    let connects = Arc::new(watch::Sender::new(0));
    let client = reqwest::Client::builder()
        .no_proxy()
        .connector_layer(CountConnects {
            connects: Arc::clone(&connects),
        })
        .build()
        .context("building the timer-on-connect client")?;
    Ok((client, connects))
}

/// Sends `request`; only if a new connection is made while it waits does a
/// TTFB timer start, counted from that connect.
pub async fn send_connect_armed(
    client: &reqwest::Client,
    connects: &watch::Sender<u64>,
    request: reqwest::Request,
    ttfb: Duration,
) -> Result<reqwest::Response, TwoPhaseError> {
    let mut connected = connects.subscribe();
    connected.mark_unchanged();
    let sending = client.execute(request);
    tokio::pin!(sending);
    tokio::select! {
        sent = &mut sending => return sent.map_err(TwoPhaseError::Http),
        _ = connected.changed() => {}
    }
    // A fresh connection: the timer runs from here. On a reused connection
    // the code never gets here, and nothing bounds the wait.
    match tokio::time::timeout(ttfb, sending).await {
        Ok(sent) => sent.map_err(TwoPhaseError::Http),
        Err(_elapsed) => Err(TwoPhaseError::Ttfb(ttfb)),
    }
}
// ANCHOR_END: connect_armed

/// One step of the check.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub policy: &'static str,
    pub step: u32,
    /// answered | timed out | error | still waiting at the bound
    pub outcome: String,
    pub lab_ms: f64,
    pub seconds: f64,
    /// Connections the tunnel accepted during the step; 0 means the request
    /// went out on a pooled connection.
    pub new_connections: u64,
    pub reused: bool,
    /// Production seconds since the check began, for the timeline.
    pub start_s: f64,
    pub end_s: f64,
    pub row: f64,
    pub error: String,
}

/// A policy's client and how it sends one GET.
struct Caller {
    policy: Policy,
    client: reqwest::Client,
    connects: Option<Arc<watch::Sender<u64>>>,
}

impl Caller {
    fn new(policy: Policy, config: &Config) -> Result<Caller> {
        Ok(match policy {
            Policy::NoTimeout => Caller {
                policy,
                client: reqwest::Client::builder()
                    .no_proxy()
                    .build()
                    .context("building a client")?,
                connects: None,
            },
            Policy::ConnectArmed => {
                let (client, connects) = connect_armed_client()?;
                Caller {
                    policy,
                    client,
                    connects: Some(connects),
                }
            }
            Policy::TwoPhase => Caller {
                policy,
                client: crate::grid::client_for(crate::grid::Setting::TwoPhase, config)?,
                connects: None,
            },
        })
    }

    async fn get(&self, url: &str, config: &Config) -> Result<(), TwoPhaseError> {
        let request = self.client.get(url).build().map_err(TwoPhaseError::Http)?;
        let two_phase = config.two_phase();
        match self.policy {
            Policy::NoTimeout => {
                let response = self
                    .client
                    .execute(request)
                    .await
                    .map_err(TwoPhaseError::Http)?;
                response.bytes().await.map_err(TwoPhaseError::Http)?;
            }
            Policy::ConnectArmed => {
                let connects = self.connects.as_ref().expect("built with a watch");
                let response =
                    send_connect_armed(&self.client, connects, request, two_phase.ttfb).await?;
                response.bytes().await.map_err(TwoPhaseError::Http)?;
            }
            Policy::TwoPhase => {
                two_phase.fetch(&self.client, request).await?;
            }
        }
        Ok(())
    }
}

/// The four steps against one policy, each step bounded by the lab.
pub async fn check(policy: Policy, config: &Config) -> Result<Vec<Step>> {
    let behaviour = config.behaviour();
    let mut upstream = Some(Downstream::start(Shape::Normal, behaviour).await?);
    let first = upstream.as_ref().expect("just started").addr;
    let tunnel = Tunnel::start(first).await?;
    let caller = Caller::new(policy, config)?;
    let url = tunnel.url("/hello");
    let began = Instant::now();
    let pause = config.lab(0.5);
    let mut steps = Vec::new();
    for step in 1..=4u32 {
        match step {
            3 => {
                // Kill the upstream; let the tunnel see its connections close.
                if let Some(dead) = upstream.take() {
                    dead.kill();
                }
                tokio::time::sleep(pause).await;
            }
            4 => {
                let restarted = Downstream::start(Shape::Normal, behaviour).await?;
                tunnel.retarget(restarted.addr);
                upstream = Some(restarted);
                tokio::time::sleep(pause).await;
            }
            _ => {}
        }
        let accepted_before = tunnel.accepted();
        let started = Instant::now();
        let ended =
            tokio::time::timeout(config.lab(config.bound_s), caller.get(&url, config)).await;
        let elapsed = started.elapsed();
        let (outcome, error) = match ended {
            Ok(Ok(())) => ("answered".to_string(), String::new()),
            Ok(Err(TwoPhaseError::Http(error))) if error.is_timeout() => {
                ("timed out".to_string(), error_chain(&error))
            }
            Ok(Err(TwoPhaseError::Http(error))) => ("error".to_string(), error_chain(&error)),
            Ok(Err(other)) => ("timed out".to_string(), other.to_string()),
            Err(_) => ("still waiting at the bound".to_string(), String::new()),
        };
        let new_connections = tunnel.accepted() - accepted_before;
        let row = Policy::ALL
            .iter()
            .position(|each| *each == policy)
            .expect("every policy is in ALL") as f64;
        steps.push(Step {
            policy: policy.name(),
            step,
            outcome,
            lab_ms: millis(elapsed),
            seconds: config.production_s(elapsed),
            new_connections,
            reused: new_connections == 0,
            start_s: config.production_s(started - began),
            end_s: config.production_s(started - began + elapsed),
            row,
            error,
        });
        tokio::time::sleep(pause).await;
    }
    Ok(steps)
}

/// The timeline's series for an outcome.
fn timeline_series(outcome: &str) -> &'static str {
    match outcome {
        "answered" => "timeline/answered",
        "still waiting at the bound" => "timeline/still-waiting",
        _ => "timeline/failed",
    }
}

/// Every policy side by side; samples `timeline/<outcome>`, summaries
/// `step/<policy>/<n>`.
pub async fn run_checks(config: &Config, out: &mut Output) -> Result<()> {
    let checked = run_all(Policy::ALL, Series::series, |policy| {
        let config = config.clone();
        async move { check(policy, &config).await }
    })
    .await?;
    let mut all: Vec<_> = checked.into_iter().flat_map(|(_, steps)| steps).collect();
    all.sort_by(|a, b| a.row.total_cmp(&b.row).then(a.step.cmp(&b.step)));
    for step in &all {
        out.write_sample(timeline_series(&step.outcome), step)?;
        out.write_summary(&format!("step/{}/{}", step.policy, step.step), step)?;
    }
    Ok(())
}
