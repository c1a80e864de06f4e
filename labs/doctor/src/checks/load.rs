//! The checks that send load: a burst on a heavy path while a canary is
//! timed (a blocked runtime), and a bounded ramp of concurrency on a path
//! with limited capacity (shed or queue), whose 429s and 503s also show how
//! the server asks to be retried.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Result;
use lab_kit::stats::{Latencies, LatencySummary};
use tokio::task::JoinSet;

use super::Patient;
use crate::finding::{Check, Finding, Grade, seconds};

fn summary(took: impl Iterator<Item = Duration>) -> LatencySummary {
    let mut latencies = Latencies::default();
    took.for_each(|took| latencies.record(took));
    latencies.summary()
}

/// A heavy request still unanswered after this is given up on.
pub const HEAVY_LIMIT: Duration = Duration::from_secs(10);
/// Heavy requests sent at once.
const BURST: usize = 8;
/// A canary slower than this, and than ten of its quiet self, stalled. A
/// heavy request on a single event loop (300 ms of CPU in the lab's Node
/// server) delays a canary by anything from 0 to its length, so the floor
/// sits well below a typical heavy request; the hardened service's canary
/// stayed under 35 ms with 8 such requests on the blocking pool of 2 cores.
const STALL_FLOOR: Duration = Duration::from_millis(100);
const REFUSED_PAUSE: Duration = Duration::from_millis(20);
/// Against a remote host: the ramp's top, and the least time between one
/// caller's calls (at most 16 x 20 = 320 requests a second).
const REMOTE_TOP: usize = 16;
const REMOTE_GAP: Duration = Duration::from_millis(50);
const CANARY_EVERY: Duration = Duration::from_millis(10);

/// Times a canary, sequentially, until `stop` is set: (start, latency).
async fn canary(patient: &Patient, stop: Arc<Mutex<bool>>) -> Result<Vec<(Instant, Duration)>> {
    let client = patient.client()?;
    let url = patient.url(&patient.options.paths.fast);
    let mut seen = Vec::new();
    while !*stop.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) {
        let started = Instant::now();
        // A canary that fails counts as slow as its timeout.
        let _ = client.status(&url, Duration::from_secs(5)).await;
        seen.push((started, started.elapsed()));
        tokio::time::sleep(CANARY_EVERY).await;
    }
    Ok(seen)
}

// ANCHOR: blocked
pub async fn blocked_runtime(patient: &Patient) -> Result<Finding> {
    let check = Check::BlockedRuntime;
    let heavy = match patient.options.paths.for_check(check) {
        Ok(path) => path.to_owned(),
        Err(skipped) => return Ok(skipped),
    };
    let stop = Arc::new(Mutex::new(false));
    let timing = {
        let (patient, stop) = (patient.clone(), stop.clone());
        tokio::spawn(async move { canary(&patient, stop).await })
    };
    // Half a second of quiet canaries, then the burst.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let burst_started = Instant::now();
    let mut burst = JoinSet::new();
    for _ in 0..BURST {
        // One connection each, as separate callers would.
        let client = patient.fresh_client()?;
        let url = patient.url(&heavy);
        let limit = patient.options.window.min(HEAVY_LIMIT);
        burst.spawn(async move { client.status(&url, limit).await.is_ok() });
    }
    let mut answered = 0;
    while let Some(done) = burst.join_next().await {
        answered += usize::from(done.unwrap_or(false));
    }
    let burst_took = burst_started.elapsed();
    tokio::time::sleep(Duration::from_millis(200)).await;
    *stop.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = true;
    let seen = timing.await??;
    let (quiet, during): (Vec<_>, Vec<_>) = seen
        .iter()
        .partition(|(started, _)| *started < burst_started);
    let quiet = summary(quiet.iter().map(|(_, took)| *took));
    let during_max = during
        .iter()
        .map(|(_, took)| *took)
        .max()
        .unwrap_or_default();
    let quiet_max = Duration::from_secs_f64(quiet.max_ms / 1000.0);
    let limit = STALL_FLOOR.max(quiet_max * 10);
    let measured = format!(
        "canary max {:.0} ms during {BURST} heavy requests (quiet: {:.0} ms)",
        during_max.as_secs_f64() * 1000.0,
        quiet_max.as_secs_f64() * 1000.0
    );
    // Every outcome reports the same measurement; only the grade and the
    // sentence differ.
    let (grade, why) = if quiet_max >= STALL_FLOOR {
        let why = format!(
            "the cheap path was already slow before the burst (up to {}), so a stall cannot \
             be told from its usual pace: point --path at a cheap route",
            seconds(quiet_max)
        );
        (Grade::Warn, why)
    } else if answered == 0 {
        let why =
            format!("none of the {BURST} requests to {heavy} got an answer within the window");
        (Grade::Warn, why)
    } else if during_max >= limit {
        let why = format!(
            "a cheap request waited while {heavy} ran ({} for the burst): the heavy work holds \
             the runtime's threads (move it to spawn_blocking or a pool of its own)",
            seconds(burst_took)
        );
        (Grade::Fail, why)
    } else {
        let why = format!("cheap requests kept their pace while {heavy} ran");
        (Grade::Pass, why)
    };
    let value = Some(during_max.as_secs_f64());
    Ok(Finding::new(check, grade, measured, value, why))
}
// ANCHOR_END: blocked

/// One request of the ramp, as the caller saw it.
#[derive(Debug, Clone)]
struct Call {
    in_flight: usize,
    status: Option<u16>,
    took: Duration,
    retry_after: Option<String>,
}

/// Closed-loop callers: `in_flight` of them, each sending again as soon as
/// its last call ended, for `length`.
async fn level(patient: &Patient, path: &str, in_flight: usize, length: Duration) -> Vec<Call> {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let until = Instant::now() + length;
    let mut callers = JoinSet::new();
    let Ok(client) = patient.client() else {
        return Vec::new();
    };
    for _ in 0..in_flight {
        let (client, calls) = (client.clone(), calls.clone());
        let url = patient.url(path);
        let timeout = patient.options.caller_timeout;
        let gap = if patient.remote() {
            REMOTE_GAP
        } else {
            Duration::ZERO
        };
        callers.spawn(async move {
            while Instant::now() < until {
                let started = Instant::now();
                let next = tokio::time::Instant::now() + gap;
                // The body is read too, so the connection can be reused.
                let (status, retry_after) = match client.get(&url, timeout).await {
                    Ok(fetched) => (Some(fetched.status), fetched.retry_after),
                    Err(_) => (None, None),
                };
                let call = Call {
                    in_flight,
                    status,
                    took: started.elapsed(),
                    retry_after,
                };
                calls.lock().unwrap_or_else(|p| p.into_inner()).push(call);
                if !matches!(status, Some(200..=299)) {
                    // Refused or failed: a pause, so that the ramp is a
                    // bounded rate (at most 50 a second a caller) and not
                    // a spin on a server that answers at once.
                    tokio::time::sleep(REFUSED_PAUSE).await;
                }
                tokio::time::sleep_until(next).await;
            }
        });
    }
    while callers.join_next().await.is_some() {}
    std::mem::take(&mut *calls.lock().unwrap_or_else(|p| p.into_inner()))
}

fn sheds(call: &Call) -> bool {
    matches!(call.status, Some(429 | 503))
}

// ANCHOR: overload
/// The overload finding and the Retry-After finding, from one ramp.
pub async fn overload(patient: &Patient) -> Result<(Finding, Finding)> {
    let options = &patient.options;
    let path = match options.paths.for_check(Check::Overload) {
        Ok(path) => path.to_owned(),
        Err(skipped) => {
            let why = "the overload check was skipped: no --load-path";
            return Ok((skipped, Finding::skip(Check::RetryAfter, why)));
        }
    };
    let mut calls = Vec::new();
    let top = if patient.remote() {
        patient.options.max_in_flight.min(REMOTE_TOP)
    } else {
        patient.options.max_in_flight
    };
    for in_flight in [4, (top / 4).max(8), top] {
        calls.extend(level(patient, &path, in_flight, Duration::from_millis(1500)).await);
    }
    let timeout = patient.options.caller_timeout;
    let at_top: Vec<&Call> = calls.iter().filter(|call| call.in_flight == top).collect();
    let shed_at_top = at_top.iter().filter(|call| sheds(call)).count();
    let timed_out = at_top
        .iter()
        .filter(|call| call.status.is_none() && call.took >= timeout)
        .count();
    let served = summary(
        at_top
            .iter()
            .filter(|call| matches!(call.status, Some(200..=299)))
            .map(|call| call.took),
    );
    let first_shed = calls
        .iter()
        .find(|call| sheds(call))
        .map(|call| call.in_flight);
    let measured = format!(
        "at {top} in flight: {} calls, {} refused with 429/503, {timed_out} timed out at {}",
        at_top.len(),
        shed_at_top,
        seconds(timeout)
    );
    let share = timed_out as f64 / at_top.len().max(1) as f64;
    let finding = match (first_shed, timed_out) {
        (Some(from), _) if share <= 0.05 => Finding::pass(
            Check::Overload,
            measured,
            Some(shed_at_top as f64),
            format!(
                "it refuses what it cannot serve in time (from {from} in flight on), so the \
                 calls it accepts finish: p99 {:.0} ms",
                served.p99_ms
            ),
        ),
        (Some(_), _) => Finding::warn(
            Check::Overload,
            measured,
            Some(timed_out as f64),
            "it sheds, but too late: callers still time out waiting in its queue (refuse sooner: \
             a shorter queue or a lower limit)",
        ),
        (None, 0) => Finding::skip(
            Check::Overload,
            format!(
                "{top} in flight did not overload it (p99 {:.0} ms, no timeouts): raise \
                 --max-in-flight or give a slower --load-path",
                served.p99_ms
            ),
        ),
        (None, _) => Finding::fail(
            Check::Overload,
            measured,
            Some(timed_out as f64),
            "it queues what it cannot serve until the callers give up, then does the work \
             anyway: refuse early with 503 and Retry-After (load shedding)",
        ),
    };
    Ok((finding, retry_after(&calls)))
}
// ANCHOR_END: overload

/// Seconds to wait, from a `Retry-After` value: delay-seconds or an HTTP date.
pub fn retry_after_seconds(value: &str) -> Option<f64> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(seconds as f64);
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(
        date.duration_since(std::time::SystemTime::now())
            .map(|left| left.as_secs_f64())
            .unwrap_or(0.0),
    )
}

fn retry_after(calls: &[Call]) -> Finding {
    let check = Check::RetryAfter;
    let refused: Vec<&Call> = calls.iter().filter(|call| sheds(call)).collect();
    if refused.is_empty() {
        return Finding::skip(
            check,
            "the overload check saw no 429 or 503 to read one from",
        );
    }
    let missing = refused
        .iter()
        .filter(|call| call.retry_after.is_none())
        .count();
    let values: Vec<(&str, Option<f64>)> = refused
        .iter()
        .filter_map(|call| call.retry_after.as_deref())
        .map(|value| (value, retry_after_seconds(value)))
        .collect();
    if let Some((bad, _)) = values.iter().find(|(_, seconds)| seconds.is_none()) {
        return Finding::fail(
            check,
            format!("Retry-After: {bad:?}"),
            None,
            "neither delay-seconds nor an HTTP date: clients cannot read it and retry on their \
             own schedule",
        );
    }
    if missing > 0 {
        return Finding::warn(
            check,
            format!(
                "{missing} of {} refusals without Retry-After",
                refused.len()
            ),
            // Its number is the least Retry-After, in seconds, where every
            // refusal had one (`--expect` bounds it): none to give here.
            None,
            "a client refused without Retry-After retries on its own schedule, often at once: \
             tell it when to come back",
        );
    }
    let seconds: Vec<f64> = values.iter().filter_map(|(_, seconds)| *seconds).collect();
    let (least, most) = seconds.iter().fold((f64::MAX, 0.0f64), |(least, most), s| {
        (least.min(*s), most.max(*s))
    });
    if least <= 0.0 {
        return Finding::warn(
            check,
            "Retry-After: 0".to_string(),
            Some(0.0),
            "it asks refused clients to come straight back: the retries arrive together",
        );
    }
    Finding::pass(
        check,
        format!(
            "Retry-After {least:.0} to {most:.0} s on all {} refusals",
            refused.len()
        ),
        Some(least),
        "refused clients are told when to come back",
    )
}
