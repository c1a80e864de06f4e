//! The provider's view: a client with a bulkhead of a few permits calls a
//! provider that sometimes hangs, with a per-call timeout. The provider counts
//! the requests it is working on (a guard in its handler, so a handler that
//! hyper drops counts as gone). What the client's limit means at the provider
//! depends on whether the client's timeout stops the request or walks away
//! from it.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result};
use axum::{Router, extract::State, routing::get};
use lab_kit::{Series, concurrently::run_all, net::AbortOnDrop, server::spawn_axum};
use serde::Serialize;
use tokio::{sync::Semaphore, task::JoinSet, time::Instant};
use tokio_util::sync::CancellationToken;

use crate::Config;

lab_kit::series! {
    /// How the client times a call out.
    pub enum ProviderClient in "provider" {
        /// reqwest's per-request timeout over HTTP/1.1: the request future is
        /// dropped, and with it the connection.
        ReqwestTimeout => "reqwest-timeout",
        /// The same over HTTP/2: the stream is reset, the connection stays.
        ReqwestTimeoutHttp2 => "reqwest-timeout-http2",
        /// The request spawned and raced against a timer: on timeout the permit
        /// goes back but the request goes on (what a timeout without an abort
        /// signal does in Node).
        AbandonedRace => "abandoned-race",
        /// reqwest's timeout, HTTP/1.1, against a provider that moves its work
        /// into `tokio::spawn`: the client stops, the provider does not (what a
        /// Node server does, where nothing stops a handler when its socket
        /// closes).
        ProviderSpawns => "provider-spawns",
    }
}

/// Requests the provider is working on now, and the most at once.
#[derive(Default)]
struct InFlight {
    now: AtomicU64,
    peak: AtomicU64,
    served: AtomicU64,
}

struct Working(Arc<InFlight>);

impl Drop for Working {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Clone)]
struct Provider {
    in_flight: Arc<InFlight>,
    hang_every: u64,
    hang: Duration,
    fast: Duration,
    /// Work in `tokio::spawn`, ended by this token when the case is over.
    spawns: Option<CancellationToken>,
}

async fn provide(State(provider): State<Provider>) -> &'static str {
    match provider.spawns.clone() {
        Some(case_over) => {
            let spawned = tokio::spawn(async move {
                tokio::select! {
                    _ = case_over.cancelled() => {}
                    _ = serve_one(&provider) => {}
                }
            });
            let _ = spawned.await;
        }
        None => serve_one(&provider).await,
    }
    "provided"
}

async fn serve_one(provider: &Provider) {
    let counts = &provider.in_flight;
    let now = counts.now.fetch_add(1, Ordering::SeqCst) + 1;
    counts.peak.fetch_max(now, Ordering::SeqCst);
    let _working = Working(Arc::clone(counts));
    let number = counts.served.fetch_add(1, Ordering::SeqCst) + 1;
    let work = if number.is_multiple_of(provider.hang_every) {
        provider.hang
    } else {
        provider.fast
    };
    tokio::time::sleep(work).await;
}

// ANCHOR: call
/// One call through the bulkhead. `abandoned` keeps the requests that the
/// racing client walked away from, so the lab can end them when it is done.
async fn call(
    kind: ProviderClient,
    client: &reqwest::Client,
    url: &str,
    timeout: Duration,
    abandoned: &Mutex<Vec<AbortOnDrop>>,
) -> bool {
    match kind {
        ProviderClient::ReqwestTimeout
        | ProviderClient::ReqwestTimeoutHttp2
        | ProviderClient::ProviderSpawns => {
            // On timeout reqwest drops the request: HTTP/1.1 closes the
            // connection, HTTP/2 sends RST_STREAM; hyper then drops the
            // provider's handler.
            client.get(url).timeout(timeout).send().await.is_ok()
        }
        ProviderClient::AbandonedRace => {
            let request = client.get(url).send();
            let mut task = tokio::spawn(async move {
                let _ = request.await;
            });
            match tokio::time::timeout(timeout, &mut task).await {
                Ok(_) => true,
                Err(_) => {
                    // The timer won; the request did not stop.
                    abandoned.lock().expect("not poisoned").push(task.into());
                    false
                }
            }
        }
    }
}
// ANCHOR_END: call

/// What the provider saw behind one kind of client.
#[derive(Debug, Clone, Serialize)]
pub struct ProviderView {
    pub client: &'static str,
    pub bulkhead: u64,
    pub calls: u64,
    pub timeouts: u64,
    pub peak_at_provider: u64,
    pub connections_accepted: u64,
}

async fn provider_case(kind: ProviderClient, config: Config) -> Result<ProviderView> {
    let in_flight = Arc::new(InFlight::default());
    let case_over = CancellationToken::new();
    let _end_spawned_work = case_over.clone().drop_guard();
    let provider = Provider {
        spawns: (kind == ProviderClient::ProviderSpawns).then(|| case_over.clone()),
        in_flight: Arc::clone(&in_flight),
        hang_every: config.provider_hang_every,
        hang: config.lab(config.provider_hang_s),
        fast: config.lab(config.provider_fast_s),
    };
    let server = spawn_axum(Router::new().route("/", get(provide)).with_state(provider)).await?;
    let client = match kind {
        ProviderClient::ReqwestTimeoutHttp2 => reqwest::Client::builder().http2_prior_knowledge(),
        ProviderClient::ReqwestTimeout
        | ProviderClient::AbandonedRace
        | ProviderClient::ProviderSpawns => reqwest::Client::builder().http1_only(),
    }
    .build()
    .context("building the client")?;
    let bulkhead = Arc::new(Semaphore::new(config.provider_bulkhead));
    let abandoned: Arc<Mutex<Vec<AbortOnDrop>>> = Arc::default();
    let until = Instant::now() + config.lab(config.provider_duration_s);
    let timeout = config.lab(config.provider_timeout_s);
    let mut users = JoinSet::new();
    for _ in 0..config.provider_users {
        let (client, bulkhead, abandoned) = (
            client.clone(),
            Arc::clone(&bulkhead),
            Arc::clone(&abandoned),
        );
        let url = server.url("/");
        users.spawn(async move {
            let (mut calls, mut timeouts) = (0_u64, 0_u64);
            while Instant::now() < until {
                let Ok(_permit) = bulkhead.acquire().await else {
                    break;
                };
                calls += 1;
                timeouts += u64::from(!call(kind, &client, &url, timeout, &abandoned).await);
            }
            (calls, timeouts)
        });
    }
    let (mut calls, mut timeouts) = (0, 0);
    while let Some(joined) = users.join_next().await {
        let (user_calls, user_timeouts) = joined.context("a user task panicked")?;
        calls += user_calls;
        timeouts += user_timeouts;
    }
    let view = ProviderView {
        client: kind.name(),
        bulkhead: config.provider_bulkhead as u64,
        calls,
        timeouts,
        peak_at_provider: in_flight.peak.load(Ordering::SeqCst),
        connections_accepted: server.stats.accepted(),
    };
    // End what the racing client left behind, then the provider.
    abandoned.lock().expect("not poisoned").clear();
    server.stop(Duration::from_millis(200)).await?;
    Ok(view)
}

/// Every kind of client at once, each against its own provider (they wait
/// on timers, not on the CPU); the views in the order of [`ProviderClient::ALL`].
pub async fn run_provider(config: &Config) -> Result<Vec<ProviderView>> {
    let results = run_all(ProviderClient::ALL, ProviderClient::series, |kind| {
        provider_case(kind, config.clone())
    })
    .await?;
    Ok(results.into_iter().map(|(_, view)| view).collect())
}
