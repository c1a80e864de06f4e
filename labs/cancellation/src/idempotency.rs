//! Part 8, idempotency keys: a payment server whose charge sometimes takes
//! longer than its client waits, and a client that retries. The charge runs
//! in a task of its own (money moves whether or not anyone waits for the
//! answer), so a client that gives up and asks again can pay twice. Three
//! servers: one that ignores the key, one that remembers a key's answer once
//! the charge is done, and one that records the key as in progress first and
//! answers a repeat with 409 and Retry-After until the answer is there.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result};
use axum::{
    Router,
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode, header::RETRY_AFTER},
    response::{IntoResponse, Response},
    routing::post,
};
use lab_kit::server::spawn_axum;
use serde::Serialize;
use tokio::task::JoinSet;

use crate::Config;

/// How the server treats the `Idempotency-Key` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHandling {
    /// Ignores it: every request is a charge.
    None,
    /// Keeps each key's answer once its charge is done, and replays it.
    AnswerOnly,
    /// Records the key as in progress before it charges; a repeat meanwhile
    /// gets 409 with Retry-After, and the answer once it is there.
    InProgress,
}

impl KeyHandling {
    pub const ALL: [KeyHandling; 3] = [
        KeyHandling::None,
        KeyHandling::AnswerOnly,
        KeyHandling::InProgress,
    ];

    pub fn name(self) -> &'static str {
        match self {
            KeyHandling::None => "no-key",
            KeyHandling::AnswerOnly => "key-answer-only",
            KeyHandling::InProgress => "key-in-progress",
        }
    }

    pub fn series(self) -> String {
        format!("idempotency/{}", self.name())
    }
}

/// One server's count, over the same payments and the same client.
#[derive(Debug, Clone, Serialize)]
pub struct Payments {
    pub server: String,
    pub payments: u64,
    /// Requests the client sent, first tries and retries.
    pub requests: u64,
    /// Charges the server made.
    pub charges: u64,
    /// Payments charged more than once.
    pub payments_charged_twice: u64,
    /// Charges beyond the first of each payment: money taken twice.
    pub duplicate_charges: u64,
    /// Payments whose client got a 200 in the end.
    pub payments_confirmed: u64,
    /// 409 answers the client got (a repeat while the charge ran).
    pub conflicts: u64,
    /// Answers replayed from the key's record.
    pub replays: u64,
}

/// Every server over the same payments, side by side (they only wait),
/// in [`KeyHandling::ALL`]'s order.
pub async fn run_idempotency(config: &Config) -> Result<Vec<Payments>> {
    let runs = KeyHandling::ALL.map(|handling| async move {
        pay(handling, config)
            .await
            .with_context(|| handling.series())
    });
    let [none, answer_only, in_progress] = runs;
    let (none, answer_only, in_progress) = tokio::try_join!(none, answer_only, in_progress)?;
    Ok(vec![none, answer_only, in_progress])
}

/// What a key's record holds.
#[derive(Clone)]
enum KeyRecord {
    InProgress,
    Done(u64),
}

struct Ledger {
    handling: KeyHandling,
    /// The charge of payment `n`, as production seconds on the lab's clock.
    charge_time: Box<dyn Fn(u64) -> Duration + Send + Sync>,
    retry_after_s: u64,
    /// Charges per payment.
    charges: Mutex<HashMap<u64, u64>>,
    keys: Mutex<HashMap<u64, KeyRecord>>,
    replays: Mutex<u64>,
    /// Charges started and finished: the run waits for the ones nobody
    /// waits for any more.
    started: AtomicU64,
    finished: AtomicU64,
}

// ANCHOR: charge
/// POST /charge: the payment's number in `Idempotency-Key`. The charge runs
/// in a task of its own: once started it completes, whoever still waits.
async fn charge(State(ledger): State<Arc<Ledger>>, headers: HeaderMap) -> Response {
    let Some(key) = headers
        .get("idempotency-key")
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
    else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    if ledger.handling != KeyHandling::None {
        let mut keys = ledger.keys.lock().expect("not poisoned");
        match keys.get(&key) {
            Some(KeyRecord::Done(charge_id)) => {
                *ledger.replays.lock().expect("not poisoned") += 1;
                return (StatusCode::OK, format!("charge {charge_id}\n")).into_response();
            }
            Some(KeyRecord::InProgress) => {
                let retry_after = HeaderValue::from(ledger.retry_after_s);
                return (StatusCode::CONFLICT, [(RETRY_AFTER, retry_after)]).into_response();
            }
            // Recorded before the charge starts, under the same lock as the
            // lookup: a repeat can never start a second charge.
            None if ledger.handling == KeyHandling::InProgress => {
                keys.insert(key, KeyRecord::InProgress);
            }
            None => {}
        }
    }
    let worker = Arc::clone(&ledger);
    let charged = tokio::spawn(async move { worker.charge(key).await });
    match charged.await {
        Ok(charge_id) => (StatusCode::OK, format!("charge {charge_id}\n")).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}
// ANCHOR_END: charge

impl Ledger {
    /// Takes the money, then records the key's answer.
    async fn charge(&self, key: u64) -> u64 {
        self.started.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep((self.charge_time)(key)).await;
        let charge_id = {
            let mut charges = self.charges.lock().expect("not poisoned");
            *charges.entry(key).or_default() += 1;
            charges.values().sum::<u64>()
        };
        if self.handling != KeyHandling::None {
            let mut keys = self.keys.lock().expect("not poisoned");
            keys.insert(key, KeyRecord::Done(charge_id));
        }
        self.finished.fetch_add(1, Ordering::SeqCst);
        charge_id
    }
}

/// What one payment's client saw.
#[derive(Default)]
struct Attempts {
    requests: u64,
    conflicts: u64,
    confirmed: bool,
}

/// One payment: up to `pay_attempts` requests with the same key, each with
/// the client's timeout; a 409's Retry-After is honoured, any other
/// failure waits the backoff.
async fn pay_once(client: reqwest::Client, url: String, key: u64, config: Config) -> Attempts {
    let mut seen = Attempts::default();
    for _ in 0..config.pay_attempts {
        seen.requests += 1;
        let sent = client
            .post(&url)
            .header("idempotency-key", key)
            .timeout(config.lab(config.pay_client_timeout_s))
            .send()
            .await;
        let wait_s = match sent {
            Ok(response) if response.status() == StatusCode::OK => {
                seen.confirmed = true;
                return seen;
            }
            Ok(response) if response.status() == StatusCode::CONFLICT => {
                seen.conflicts += 1;
                response
                    .headers()
                    .get(RETRY_AFTER)
                    .and_then(|value| value.to_str().ok()?.parse::<f64>().ok())
                    .unwrap_or(config.pay_backoff_s)
            }
            _ => config.pay_backoff_s,
        };
        tokio::time::sleep(config.lab(wait_s)).await;
    }
    seen
}

/// One server, the same payments.
async fn pay(handling: KeyHandling, config: &Config) -> Result<Payments> {
    let (fast, slow, every) = (
        config.pay_charge_s,
        config.pay_slow_charge_s,
        config.pay_slow_every,
    );
    let scale = config.time_scale;
    let ledger = Arc::new(Ledger {
        handling,
        // One payment in `every` meets a slow provider.
        charge_time: Box::new(move |key| {
            let seconds = if key % every == 0 { slow } else { fast };
            Duration::from_secs_f64(seconds / scale)
        }),
        retry_after_s: config.pay_retry_after_s,
        charges: Mutex::default(),
        keys: Mutex::default(),
        replays: Mutex::default(),
        started: AtomicU64::new(0),
        finished: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/charge", post(charge))
        .with_state(Arc::clone(&ledger));
    let server = spawn_axum(app).await?;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("building the payment client")?;
    let mut payers = JoinSet::new();
    for key in 1..=config.payments {
        let (client, url, config) = (client.clone(), server.url("/charge"), config.clone());
        payers.spawn(pay_once(client, url, key, config));
    }
    let (mut requests, mut conflicts, mut confirmed) = (0, 0, 0);
    while let Some(joined) = payers.join_next().await {
        let seen = joined.context("a payer panicked")?;
        requests += seen.requests;
        conflicts += seen.conflicts;
        confirmed += u64::from(seen.confirmed);
    }
    // Charges nobody waits for any more still complete: wait for them.
    let until = tokio::time::Instant::now() + config.lab(config.pay_slow_charge_s * 2.0);
    let running = || ledger.started.load(Ordering::SeqCst) > ledger.finished.load(Ordering::SeqCst);
    while tokio::time::Instant::now() < until && running() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.stop(Duration::from_millis(200)).await?;
    let charges = ledger.charges.lock().expect("not poisoned").clone();
    Ok(Payments {
        server: handling.name().to_string(),
        payments: config.payments,
        requests,
        charges: charges.values().sum(),
        payments_charged_twice: charges.values().filter(|count| **count > 1).count() as u64,
        duplicate_charges: charges.values().map(|count| count.saturating_sub(1)).sum(),
        payments_confirmed: confirmed,
        conflicts,
        replays: *ledger.replays.lock().expect("not poisoned"),
    })
}
