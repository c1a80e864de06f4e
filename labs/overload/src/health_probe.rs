//! Part 7, a breaker opened by an active health probe: an upstream that
//! dies (its process stops: the listener and every connection close, so a
//! call is refused at once), met by the lab's reactive breaker, which opens
//! on the failures of the users' own calls, by a background probe of the
//! upstream's health route, which takes the upstream out after a few failed
//! probes, and by both. Each at a quiet and a busy rate of users: the
//! reactive breaker needs a number of failed calls, the probe a number of
//! probe intervals.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result};
use axum::{Router, http::StatusCode, routing::get};
use lab_kit::{
    Series,
    concurrently::run_all,
    net::AbortOnDrop,
    server::{HyperServer, http1_builder, spawn_hyper},
};
use serde::Serialize;
use tokio::time::{Instant, MissedTickBehavior};

use crate::{
    Config,
    arrivals::open_loop,
    on_lab_clock,
    retrying::{ClockedBreaker, lab_breaker},
};

lab_kit::series! {
    /// What takes the dead upstream out, and how busy its callers are.
    pub enum ProbeCase in "probe" {
        /// The lab's breaker, fed by the users' calls; a few users a second.
        ReactiveQuiet => "reactive-quiet",
        /// A background probe of `/healthz`, no breaker; the same users.
        ProbeQuiet => "probe-quiet",
        /// The probe and the reactive breaker together.
        BothQuiet => "both-quiet",
        ReactiveBusy => "reactive-busy",
        ProbeBusy => "probe-busy",
        BothBusy => "both-busy",
    }
}

impl ProbeCase {
    fn reactive(self) -> bool {
        !matches!(self, ProbeCase::ProbeQuiet | ProbeCase::ProbeBusy)
    }

    fn probed(self) -> bool {
        !matches!(self, ProbeCase::ReactiveQuiet | ProbeCase::ReactiveBusy)
    }

    fn busy(self) -> bool {
        matches!(
            self,
            ProbeCase::ReactiveBusy | ProbeCase::ProbeBusy | ProbeCase::BothBusy
        )
    }
}

/// What the users and the upstream saw, in production time.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeOutcome {
    /// The compression of this part's clock (the caption gives parts 1 to 4's).
    pub time_scale: f64,
    pub rate_per_s: f64,
    pub users: u64,
    pub ok: u64,
    /// Calls sent to the upstream that failed (it had died): wasted, in all
    /// and before the upstream was first taken out.
    pub wasted: u64,
    pub wasted_before_open: u64,
    /// Users refused at once, without a call.
    pub refused: u64,
    /// From the death to the moment the first gate closed (the breaker
    /// opened, or the probe took the upstream out); the rest of the run if
    /// none did, which `opened` says.
    pub time_to_open_ms: f64,
    pub opened: bool,
    /// Health requests the probe sent over the run (0 without a probe): its
    /// price while all is well.
    pub probe_requests: u64,
}

// ANCHOR: probe
/// A background prober of one upstream's health route: after `failures`
/// failed probes in a row it takes the upstream out (every call is refused
/// at once), and the first probe that passes puts it back.
pub struct HealthProbe {
    out: Arc<AtomicBool>,
    /// When it first took the upstream out, in production ms from the epoch.
    first_out_ms: Arc<Mutex<Option<f64>>>,
    sent: Arc<AtomicU64>,
    _task: AbortOnDrop,
}

/// How often, with what timeout, and after how many failures.
#[derive(Debug, Clone, Copy)]
pub struct ProbeSettings {
    pub interval: Duration,
    pub timeout: Duration,
    pub failures: u32,
}

impl HealthProbe {
    pub fn start(
        client: reqwest::Client,
        url: String,
        settings: ProbeSettings,
        epoch: Instant,
        time_scale: f64,
    ) -> HealthProbe {
        let out = Arc::new(AtomicBool::new(false));
        let first_out_ms = Arc::new(Mutex::new(None));
        let sent = Arc::new(AtomicU64::new(0));
        let (task_out, task_first, task_sent) = (
            Arc::clone(&out),
            Arc::clone(&first_out_ms),
            Arc::clone(&sent),
        );
        let task = AbortOnDrop::spawn(async move {
            let mut ticks = tokio::time::interval(settings.interval);
            // A probe that took long does not make the next ones bunch up.
            ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
            let mut failed_in_a_row = 0;
            loop {
                ticks.tick().await;
                task_sent.fetch_add(1, Ordering::Relaxed);
                let probe = client.get(&url).timeout(settings.timeout).send().await;
                if matches!(probe, Ok(response) if response.status().is_success()) {
                    failed_in_a_row = 0;
                    task_out.store(false, Ordering::Relaxed);
                    continue;
                }
                failed_in_a_row += 1;
                if failed_in_a_row >= settings.failures && !task_out.swap(true, Ordering::Relaxed) {
                    let now_ms = epoch.elapsed().as_secs_f64() * 1000.0 * time_scale;
                    let mut first = task_first.lock().expect("no panic holds it");
                    first.get_or_insert(now_ms);
                }
            }
        });
        HealthProbe {
            out,
            first_out_ms,
            sent,
            _task: task,
        }
    }

    /// Whether the probe has taken the upstream out.
    pub fn is_out(&self) -> bool {
        self.out.load(Ordering::Relaxed)
    }
}
// ANCHOR_END: probe

/// How one user's call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Ok,
    Failed,
    Refused,
}

/// What every user of one case shares.
struct Callers {
    client: reqwest::Client,
    url: String,
    timeout: Duration,
    breaker: Option<ClockedBreaker>,
    probe: Option<HealthProbe>,
}

/// One user's call: refused if the probe has taken the upstream out or the
/// breaker is open; otherwise sent, and its outcome told to the breaker.
async fn user_call(callers: &Callers) -> Ended {
    if callers.probe.as_ref().is_some_and(HealthProbe::is_out) {
        return Ended::Refused;
    }
    let call = callers
        .client
        .get(&callers.url)
        .timeout(callers.timeout)
        .send();
    let answered = async { matches!(call.await, Ok(response) if response.status().is_success()) };
    let answered = match &callers.breaker {
        None => answered.await,
        Some(breaker) => match breaker.around(answered, |answered| *answered).await {
            Some(answered) => answered,
            None => return Ended::Refused,
        },
    };
    if answered { Ended::Ok } else { Ended::Failed }
}

/// The upstream: `/work` takes `service`, `/healthz` answers at once.
///
/// hyper in the kit's accept loop: dropping it closes the listener and
/// every connection, as the death of the upstream's process would
/// (`axum::serve`'s connections would outlive its task).
async fn start_upstream(service: Duration) -> Result<HyperServer> {
    let app = Router::new()
        .route(
            "/work",
            get(move || async move {
                tokio::time::sleep(service).await;
                StatusCode::OK
            }),
        )
        .route("/healthz", get(|| async { StatusCode::OK }));
    spawn_hyper(http1_builder(None), app)
        .await
        .context("starting the upstream")
}

/// When a gate (the breaker or the probe) first closed after the death at
/// `died_s`, in production seconds; `None` if neither did.
fn first_closed_s(callers: &Callers, died_s: f64) -> Option<f64> {
    let breaker_opened_s = callers.breaker.as_ref().and_then(|breaker| {
        breaker
            .opened_s()
            .into_iter()
            .find(|opened_s| *opened_s >= died_s)
    });
    let probe_out_s = callers.probe.as_ref().and_then(|probe| {
        let first = *probe.first_out_ms.lock().expect("no panic holds it");
        first.map(|ms| ms / 1000.0)
    });
    [breaker_opened_s, probe_out_s]
        .into_iter()
        .flatten()
        .reduce(f64::min)
}

async fn probe_case(case: ProbeCase, config: Config) -> Result<ProbeOutcome> {
    let scale = config.guard_time_scale;
    let lab = move |production_s: f64| on_lab_clock(production_s, scale);
    let service = lab(config.enrich_service_ms / 1000.0);
    let upstream = start_upstream(service).await?;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("building the client")?;
    let epoch = Instant::now();
    let probe = case.probed().then(|| {
        let settings = ProbeSettings {
            interval: lab(config.probe_interval_ms / 1000.0),
            timeout: lab(config.probe_timeout_ms / 1000.0),
            failures: config.probe_failures,
        };
        HealthProbe::start(
            client.clone(),
            upstream.url("/healthz"),
            settings,
            epoch,
            scale,
        )
    });
    let callers = Arc::new(Callers {
        client,
        url: upstream.url("/work"),
        timeout: lab(config.enrich_attempt_timeout_ms / 1000.0),
        breaker: case
            .reactive()
            .then(|| ClockedBreaker::new(lab_breaker(), epoch, scale)),
        probe,
    });
    // The upstream dies at `probe_dies_at_s`, while the users keep coming.
    let death = tokio::spawn(async move {
        tokio::time::sleep_until(epoch + lab(config.probe_dies_at_s)).await;
        drop(upstream);
    });
    let rate_per_s = if case.busy() {
        config.probe_busy_rate_per_s
    } else {
        config.probe_quiet_rate_per_s
    };
    let calls = open_loop(
        rate_per_s * scale,
        epoch,
        lab(config.probe_duration_s),
        config.seed,
        {
            let callers = Arc::clone(&callers);
            move |_, arrived| {
                let callers = Arc::clone(&callers);
                async move { (arrived.as_secs_f64() * scale, user_call(&callers).await) }
            }
        },
    )
    .await?;
    death.await.context("the upstream's death")?;
    // When a gate first closed after the death, in production seconds.
    let died_s = config.probe_dies_at_s;
    let opened_s = first_closed_s(&callers, died_s);
    let count = |keep: &dyn Fn(f64, Ended) -> bool| {
        calls
            .iter()
            .filter(|(arrived_s, ended)| keep(*arrived_s, *ended))
            .count() as u64
    };
    let until_s = opened_s.unwrap_or(config.probe_duration_s);
    Ok(ProbeOutcome {
        time_scale: scale,
        rate_per_s,
        users: calls.len() as u64,
        ok: count(&|_, ended| ended == Ended::Ok),
        wasted: count(&|_, ended| ended == Ended::Failed),
        wasted_before_open: count(&|arrived_s, ended| {
            ended == Ended::Failed && arrived_s < until_s
        }),
        refused: count(&|_, ended| ended == Ended::Refused),
        time_to_open_ms: (until_s - died_s) * 1000.0,
        opened: opened_s.is_some(),
        probe_requests: callers
            .probe
            .as_ref()
            .map_or(0, |probe| probe.sent.load(Ordering::Relaxed)),
    })
}

/// Every case side by side, each with its own upstream, probe and breaker.
pub async fn run_probes(config: &Config) -> Result<Vec<(ProbeCase, ProbeOutcome)>> {
    let config = config.clone();
    run_all(ProbeCase::ALL, Series::series, move |case| {
        probe_case(case, config.clone())
    })
    .await
}
