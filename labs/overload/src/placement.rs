//! Part 4, the breaker's place, measured both ways: the lab's own breaker
//! nowhere, outside the retries (one breaker call per user request, around
//! the whole retrying call) and around each attempt, against two failure
//! shapes: a provider that hangs (every attempt times out) and a healthy
//! provider with short blips (a few hundred milliseconds of 503s, which the
//! retries absorb). Part 3 measured only the hang, where a breaker around
//! each attempt opens sooner; the blips show what that costs.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result};
use axum::{Router, extract::State, http::StatusCode, routing::get};
use lab_kit::{Series, concurrently::run_all, server::spawn_axum};
use seeded_rng::SplitMix64;
use serde::Serialize;
use tokio::time::Instant;

use crate::{
    Config,
    arrivals::open_loop,
    on_lab_clock,
    retrying::{Attempts, ClockedBreaker, full_jitter, lab_breaker},
};

lab_kit::series! {
    /// What the provider does, and where the breaker sits.
    pub enum PlacementCase in "placement" {
        /// The provider hangs for three seconds; retries, no breaker.
        HangNoBreaker => "hang-no-breaker",
        /// The same hang; one breaker call per user request, around the
        /// whole retrying call.
        HangOutside => "hang-outside-retries",
        /// The same hang; the breaker around each attempt, a refusal final.
        HangInside => "hang-inside-retries",
        /// A healthy provider with short blips of 503s; no breaker.
        BlipsNoBreaker => "blips-no-breaker",
        BlipsOutside => "blips-outside-retries",
        BlipsInside => "blips-inside-retries",
    }
}

/// Where the breaker sits relative to the retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerPlace {
    Nowhere,
    /// One breaker call per user request: it sees the retrying call's end.
    OutsideRetries,
    /// One breaker call per attempt; an attempt it refuses ends the call.
    AroundEachAttempt,
}

/// How the provider fails during its spells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureShape {
    /// It holds every request until the spell ends: attempts time out.
    Hangs,
    /// It answers 503 at once: an error burst that retries outlast.
    Blips,
}

impl PlacementCase {
    pub fn place(self) -> BreakerPlace {
        match self {
            PlacementCase::HangNoBreaker | PlacementCase::BlipsNoBreaker => BreakerPlace::Nowhere,
            PlacementCase::HangOutside | PlacementCase::BlipsOutside => {
                BreakerPlace::OutsideRetries
            }
            PlacementCase::HangInside | PlacementCase::BlipsInside => {
                BreakerPlace::AroundEachAttempt
            }
        }
    }

    pub fn shape(self) -> FailureShape {
        match self {
            PlacementCase::HangNoBreaker
            | PlacementCase::HangOutside
            | PlacementCase::HangInside => FailureShape::Hangs,
            _ => FailureShape::Blips,
        }
    }
}

/// When the provider fails, in production seconds from the start: one hang,
/// or a blip every `placement_blip_every_s` that ends a second before the
/// run does (so the breaker's recovery after the last one is measured too).
pub fn spells(shape: FailureShape, config: &Config) -> Vec<(f64, f64)> {
    match shape {
        FailureShape::Hangs => vec![(config.placement_hang_from_s, config.placement_hang_until_s)],
        FailureShape::Blips => {
            let blip_s = config.placement_blip_ms / 1000.0;
            (0..)
                .map(|index| {
                    config.placement_first_blip_s + index as f64 * config.placement_blip_every_s
                })
                .map(|from| (from, from + blip_s))
                .take_while(|(_, until)| *until <= config.placement_duration_s - 1.0)
                .collect()
        }
    }
}

/// The longest pause before a retry, in production time.
const PAUSE_CAP: Duration = Duration::from_secs(1);

/// What the users, the provider and the breaker saw, in production time.
#[derive(Debug, Clone, Serialize)]
pub struct PlacementOutcome {
    pub users: u64,
    pub ok: u64,
    /// Every attempt failed; refused by the breaker (at once, not retried);
    /// and the two together: the errors users saw.
    pub failed: u64,
    pub refused: u64,
    pub user_errors: u64,
    /// Requests that reached the provider, in all and during its spells.
    pub reached_provider: u64,
    pub reached_while_failing: u64,
    /// How many spells (one hang, or the blips), and the requests that
    /// reached the provider in one, on average: what a breaker around each
    /// attempt counts as failures in one spell, before it opens.
    pub spells: u64,
    pub reached_per_spell: f64,
    /// The failures in a window that open the lab's breaker: half of its 20
    /// calls (and its minimum of 10 calls).
    pub breaker_opens_at_failures: f64,
    /// Times the breaker opened, and those that were false: while the
    /// provider was healthy apart from blips the retries absorb (every open
    /// of the blips cases), or after a hang's end by more than one user's
    /// longest call.
    pub opens: u64,
    pub false_opens: u64,
    /// The longest time, after a spell ended, until the last user the
    /// breaker refused arrived (0 without a breaker: nothing refuses).
    pub recovered_after_ms: f64,
}

/// The provider: 200 after `service`, except during its spells.
struct ProviderState {
    shape: FailureShape,
    spells: Vec<(f64, f64)>,
    service: Duration,
    epoch: Instant,
    time_scale: f64,
    arrived: AtomicU64,
    arrived_in_spell: AtomicU64,
}

impl ProviderState {
    fn now_s(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64() * self.time_scale
    }
}

async fn answer(State(state): State<Arc<ProviderState>>) -> StatusCode {
    state.arrived.fetch_add(1, Ordering::Relaxed);
    let now_s = state.now_s();
    let spell = state
        .spells
        .iter()
        .find(|(from, until)| (*from..*until).contains(&now_s));
    let Some((_, until_s)) = spell else {
        tokio::time::sleep(state.service).await;
        return StatusCode::OK;
    };
    state.arrived_in_spell.fetch_add(1, Ordering::Relaxed);
    match state.shape {
        FailureShape::Hangs => {
            // Held to the spell's end; the caller's timeout ends the attempt
            // long before, and hyper drops this handler when it leaves.
            tokio::time::sleep(on_lab_clock(until_s - now_s, state.time_scale)).await;
            StatusCode::OK
        }
        FailureShape::Blips => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// What every user of one case shares.
struct Users {
    place: BreakerPlace,
    breaker: ClockedBreaker,
    attempts: Attempts,
    backoff_base: Duration,
    time_scale: f64,
}

/// How one user's request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Ok,
    Failed,
    Refused,
}

// ANCHOR: placement
/// One user request: up to `retries` retries after full-jitter pauses; with
/// `each_attempt`, every attempt goes through that breaker, and an attempt
/// it refuses ends the request (a refusal is never retried).
async fn retrying(
    users: &Users,
    rng: &mut SplitMix64,
    each_attempt: Option<&ClockedBreaker>,
) -> Ended {
    for attempt_number in 0..=users.attempts.retries {
        if attempt_number > 0 {
            let pause = full_jitter(attempt_number, users.backoff_base, PAUSE_CAP, rng);
            tokio::time::sleep(pause.div_f64(users.time_scale)).await;
        }
        let attempt = users.attempts.once();
        let answered = match each_attempt {
            None => attempt.await,
            Some(breaker) => match breaker.around(attempt, |answered| *answered).await {
                Some(answered) => answered,
                None => return Ended::Refused,
            },
        };
        if answered {
            return Ended::Ok;
        }
    }
    Ended::Failed
}

async fn user_request(users: &Users, seed: u64) -> Ended {
    let mut rng = SplitMix64::new(seed);
    match users.place {
        BreakerPlace::Nowhere => retrying(users, &mut rng, None).await,
        // One breaker call per user request: the breaker sees only how the
        // whole retrying call ended, so a blip the retries absorbed is a
        // success in its window.
        BreakerPlace::OutsideRetries => {
            let whole_call = retrying(users, &mut rng, None);
            let ended = users
                .breaker
                .around(whole_call, |ended| *ended == Ended::Ok);
            ended.await.unwrap_or(Ended::Refused)
        }
        // Every attempt counts: each failed attempt of a blip is a failure
        // in the window, although the user's retry would have succeeded.
        BreakerPlace::AroundEachAttempt => retrying(users, &mut rng, Some(&users.breaker)).await,
    }
}
// ANCHOR_END: placement

async fn placement_case(case: PlacementCase, config: Config) -> Result<PlacementOutcome> {
    let scale = config.time_scale;
    let lab = |production_s: f64| on_lab_clock(production_s, scale);
    let epoch = Instant::now();
    let spells = spells(case.shape(), &config);
    let provider = Arc::new(ProviderState {
        shape: case.shape(),
        spells: spells.clone(),
        service: lab(config.bulkhead_service_ms / 1000.0),
        epoch,
        time_scale: scale,
        arrived: AtomicU64::new(0),
        arrived_in_spell: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/work", get(answer))
        .with_state(Arc::clone(&provider));
    let server = spawn_axum(app).await.context("starting the provider")?;
    let breaker_config = lab_breaker();
    let users = Arc::new(Users {
        place: case.place(),
        breaker: ClockedBreaker::new(breaker_config, epoch, scale),
        attempts: Attempts::new(
            server.url("/work"),
            lab(config.breaker_attempt_timeout_ms / 1000.0),
            config.breaker_retries,
        )?,
        backoff_base: Duration::from_secs_f64(config.placement_backoff_base_ms / 1000.0),
        time_scale: scale,
    });
    let seed = config.seed;
    let calls = open_loop(
        config.placement_rate_per_s * scale,
        epoch,
        lab(config.placement_duration_s),
        seed,
        {
            let users = Arc::clone(&users);
            move |index, arrived| {
                let users = Arc::clone(&users);
                async move { (arrived, user_request(&users, seed ^ (index + 1)).await) }
            }
        },
    )
    .await?;
    let count = |wanted: Ended| calls.iter().filter(|(_, ended)| *ended == wanted).count() as u64;
    let (ok, failed, refused) = (
        count(Ended::Ok),
        count(Ended::Failed),
        count(Ended::Refused),
    );
    // After a spell's end, the breaker may still refuse: until the last
    // refused user who arrived before the next spell began.
    let mut recovered_after_s: f64 = 0.0;
    for (index, (_, until_s)) in spells.iter().enumerate() {
        let next_s = spells
            .get(index + 1)
            .map_or(f64::INFINITY, |(from_s, _)| *from_s);
        for (arrived, ended) in &calls {
            let arrived_s = arrived.as_secs_f64() * scale;
            if *ended == Ended::Refused && arrived_s >= *until_s && arrived_s < next_s {
                recovered_after_s = recovered_after_s.max(arrived_s - until_s);
            }
        }
    }
    // The longest user call: every attempt timed out, after the longest pauses.
    let retries = f64::from(config.breaker_retries);
    let longest_call_s = (retries + 1.0) * config.breaker_attempt_timeout_ms / 1000.0
        + retries * PAUSE_CAP.as_secs_f64();
    let opens = match case.place() {
        BreakerPlace::Nowhere => Vec::new(),
        _ => users.breaker.opened_s(),
    };
    let false_opens = opens
        .iter()
        .filter(|opened_s| match case.shape() {
            FailureShape::Blips => true,
            FailureShape::Hangs => spells.iter().all(|(from_s, until_s)| {
                **opened_s < *from_s || **opened_s > until_s + longest_call_s
            }),
        })
        .count() as u64;
    let reached_while_failing = provider.arrived_in_spell.load(Ordering::Relaxed);
    Ok(PlacementOutcome {
        users: calls.len() as u64,
        ok,
        failed,
        refused,
        user_errors: failed + refused,
        reached_provider: provider.arrived.load(Ordering::Relaxed),
        reached_while_failing,
        spells: spells.len() as u64,
        reached_per_spell: reached_while_failing as f64 / spells.len().max(1) as f64,
        breaker_opens_at_failures: (breaker_config.failure_rate * breaker_config.window as f64)
            .max(breaker_config.min_calls as f64),
        opens: opens.len() as u64,
        false_opens,
        recovered_after_ms: recovered_after_s * 1000.0,
    })
}

/// Every case side by side, each with its own provider and breaker.
pub async fn run_placements(config: &Config) -> Result<Vec<(PlacementCase, PlacementOutcome)>> {
    let config = config.clone();
    run_all(PlacementCase::ALL, Series::series, move |case| {
        placement_case(case, config.clone())
    })
    .await
}
