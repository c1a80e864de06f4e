//! The contention experiment behind "Exponential Backoff And Jitter" (AWS, 2015),
//! as a pure, deterministic simulation: the same seed gives the same run, here,
//! in the native lab and in the browser widget (wasm32).
//!
//! The model: `clients` clients start together, and each wants to update one
//! row exactly once with optimistic concurrency. An attempt is a read (one
//! network hop to the server, one back), then a conditional write carrying the
//! version it read (one hop to the server, one back). The write wins only if
//! no other write landed since that read. A loser sleeps for its strategy's
//! backoff and starts again with a new read. Every write is one "call": the
//! work the server does. Every network hop takes |N(mean, sd)| milliseconds.
//!
//! No I/O, no threads, no clock, no system randomness: time is a number in the
//! event queue and randomness comes from `seeded_rng::SplitMix64` seeded by the caller.

use std::{cmp::Ordering, collections::BinaryHeap};

use seeded_rng::SplitMix64;

/// How a client waits after a failed write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Retry at once.
    None,
    /// `min(cap, base * 2^n)`: capped exponential, no randomness.
    Exponential,
    /// `U(0, min(cap, base * 2^n))`: the whole window is random.
    FullJitter,
    /// `v/2 + U(0, v/2)` with `v = min(cap, base * 2^n)`: half fixed, half random.
    EqualJitter,
    /// `min(cap, U(base, 3 * previous sleep))`: the next sleep grows from the last one.
    Decorrelated,
    /// `base`, every time: a fixed delay, as `sleep(1 s)` in a loop waits.
    Constant,
}

impl Strategy {
    /// Every strategy, in the order the charts and the widget list them.
    pub const ALL: [Strategy; 6] = [
        Strategy::None,
        Strategy::Exponential,
        Strategy::EqualJitter,
        Strategy::FullJitter,
        Strategy::Decorrelated,
        Strategy::Constant,
    ];

    /// The name used in data files, charts and the widget's select box.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::None => "none",
            Strategy::Exponential => "exponential",
            Strategy::FullJitter => "full-jitter",
            Strategy::EqualJitter => "equal-jitter",
            Strategy::Decorrelated => "decorrelated",
            Strategy::Constant => "constant",
        }
    }

    /// The inverse of [`Strategy::name`].
    pub fn from_name(name: &str) -> Option<Strategy> {
        Strategy::ALL
            .into_iter()
            .find(|strategy| strategy.name() == name)
    }

    /// A small integer for the wasm boundary (the index in [`Strategy::ALL`]).
    pub fn from_index(index: u32) -> Option<Strategy> {
        Strategy::ALL.get(index as usize).copied()
    }
}

/// One run's parameters. Times are milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimConfig {
    pub clients: u32,
    pub base_ms: f64,
    pub cap_ms: f64,
    pub strategy: Strategy,
    pub seed: u64,
    /// Mean and standard deviation of one network hop.
    pub net_mean_ms: f64,
    pub net_sd_ms: f64,
    /// A bound on the work one run may do; a run that reaches it stops and
    /// says so in [`SimResult::truncated`] rather than running on.
    pub max_calls: u64,
}

impl SimConfig {
    /// The published experiment's parameters: base 5 ms, cap 2 s, network
    /// hops of |N(10 ms, 2 ms)|.
    pub fn published(clients: u32, strategy: Strategy, seed: u64) -> SimConfig {
        SimConfig {
            clients,
            base_ms: 5.0,
            cap_ms: 2000.0,
            strategy,
            seed,
            net_mean_ms: 10.0,
            net_sd_ms: 2.0,
            max_calls: 5_000_000,
        }
    }
}

/// What one run did.
#[derive(Debug, Clone, PartialEq)]
pub struct SimResult {
    /// Writes the server handled, won and lost.
    pub calls: u64,
    /// Writes that lost (the wasted work).
    pub failures: u64,
    /// When the last client learned that its write won.
    pub completion_ms: f64,
    /// The arrival time of every write at the server, in order.
    pub call_times_ms: Vec<f64>,
    /// True when the run hit `max_calls` before every client finished.
    pub truncated: bool,
}

impl SimResult {
    /// Calls per time bucket of `bucket_ms`, from 0 to the last call: the
    /// load the server saw over time (the herd's clusters show up here).
    pub fn calls_per_bucket(&self, bucket_ms: f64) -> Vec<u32> {
        let bucket_ms = if bucket_ms > 0.0 { bucket_ms } else { 1.0 };
        let last = self.call_times_ms.last().copied().unwrap_or(0.0);
        let mut counts = vec![0u32; (last / bucket_ms) as usize + 1];
        for &time in &self.call_times_ms {
            counts[(time / bucket_ms) as usize] += 1;
        }
        counts
    }

    /// The same, with a fixed number of buckets spanning `0..span_ms`; calls
    /// after `span_ms` land in the last bucket.
    pub fn histogram(&self, span_ms: f64, buckets: usize) -> Vec<u32> {
        let buckets = buckets.max(1);
        let width = if span_ms > 0.0 {
            span_ms / buckets as f64
        } else {
            1.0
        };
        let mut counts = vec![0u32; buckets];
        for &time in &self.call_times_ms {
            let index = ((time / width) as usize).min(buckets - 1);
            counts[index] += 1;
        }
        counts
    }
}

/// The sleep before retry number `attempt` (1 for the first retry).
/// `previous_ms` is the client's last sleep; decorrelated jitter grows from it.
pub fn backoff_ms(
    strategy: Strategy,
    attempt: u32,
    base_ms: f64,
    cap_ms: f64,
    previous_ms: f64,
    rng: &mut SplitMix64,
) -> f64 {
    // Capped exponential: base * 2^attempt, doubling in a loop that stops at
    // the cap, so a large attempt count cannot overflow to infinity.
    let exponential = || {
        let mut window = base_ms;
        for _ in 0..attempt {
            if window >= cap_ms {
                break;
            }
            window *= 2.0;
        }
        window.min(cap_ms)
    };
    match strategy {
        Strategy::None => 0.0,
        Strategy::Exponential => exponential(),
        Strategy::FullJitter => rng.uniform(0.0, exponential()),
        Strategy::EqualJitter => {
            let window = exponential();
            window / 2.0 + rng.uniform(0.0, window / 2.0)
        }
        Strategy::Decorrelated => cap_ms.min(rng.uniform(base_ms, previous_ms.max(base_ms) * 3.0)),
        Strategy::Constant => base_ms,
    }
}

/// What happens next in the simulation: the read or the write of one client
/// reaches the server.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Event {
    time_ms: f64,
    /// Insertion order: breaks ties so the run never depends on heap internals.
    sequence: u64,
    client: u32,
    kind: EventKind,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum EventKind {
    Read,
    Write { version_read: u64 },
}

impl Eq for Event {}

impl Ord for Event {
    // BinaryHeap is a max-heap: reverse, so the earliest event pops first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time_ms
            .total_cmp(&self.time_ms)
            .then_with(|| other.sequence.cmp(&self.sequence))
    }
}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Runs the experiment once.
pub fn simulate(config: &SimConfig) -> SimResult {
    let mut rng = SplitMix64::new(config.seed);
    let mean = config.net_mean_ms;
    let sd = config.net_sd_ms;
    // One network hop: |N(mean, sd)|, as in the published model.
    let hop = |rng: &mut SplitMix64| (mean + sd * rng.standard_normal()).abs();

    let clients = config.clients as usize;
    let mut attempts = vec![0u32; clients];
    let mut previous_sleep = vec![config.base_ms; clients];
    let mut queue = BinaryHeap::with_capacity(clients);
    let mut sequence = 0u64;
    let mut push = |queue: &mut BinaryHeap<Event>, time_ms: f64, client: u32, kind: EventKind| {
        sequence += 1;
        queue.push(Event {
            time_ms,
            sequence,
            client,
            kind,
        });
    };
    // Everyone starts at once: the herd, as after a deploy or a failover.
    for client in 0..config.clients {
        let arrives = hop(&mut rng);
        push(&mut queue, arrives, client, EventKind::Read);
    }

    let mut version = 0u64;
    let mut result = SimResult {
        calls: 0,
        failures: 0,
        completion_ms: 0.0,
        call_times_ms: Vec::new(),
        truncated: false,
    };
    while let Some(event) = queue.pop() {
        let now = event.time_ms;
        match event.kind {
            EventKind::Read => {
                // The reply carries the version; the client sends its write
                // as soon as the reply arrives: two hops later it lands.
                let lands = now + hop(&mut rng) + hop(&mut rng);
                push(
                    &mut queue,
                    lands,
                    event.client,
                    EventKind::Write {
                        version_read: version,
                    },
                );
            }
            EventKind::Write { version_read } => {
                result.calls += 1;
                result.call_times_ms.push(now);
                let reply_arrives = now + hop(&mut rng);
                if version_read == version {
                    version += 1;
                    result.completion_ms = result.completion_ms.max(reply_arrives);
                    continue;
                }
                result.failures += 1;
                if result.calls >= config.max_calls {
                    result.truncated = true;
                    break;
                }
                let client = event.client as usize;
                attempts[client] += 1;
                let sleep = backoff_ms(
                    config.strategy,
                    attempts[client],
                    config.base_ms,
                    config.cap_ms,
                    previous_sleep[client],
                    &mut rng,
                );
                previous_sleep[client] = sleep;
                let next_read = reply_arrives + sleep + hop(&mut rng);
                push(&mut queue, next_read, event.client, EventKind::Read);
            }
        }
    }
    result
}

/// The mean of `runs` seeded runs (seeds `first_seed..first_seed + runs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Averaged {
    pub calls: f64,
    pub failures: f64,
    pub completion_ms: f64,
    pub runs: u32,
}

/// Runs the experiment `runs` times with consecutive seeds and averages.
pub fn average(config: &SimConfig, runs: u32) -> Averaged {
    let runs = runs.max(1);
    let (mut calls, mut failures, mut completion) = (0.0, 0.0, 0.0);
    for offset in 0..u64::from(runs) {
        let result = simulate(&SimConfig {
            seed: config.seed.wrapping_add(offset),
            ..*config
        });
        calls += result.calls as f64;
        failures += result.failures as f64;
        completion += result.completion_ms;
    }
    let count = f64::from(runs);
    Averaged {
        calls: calls / count,
        failures: failures / count,
        completion_ms: completion / count,
        runs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_run() {
        for strategy in Strategy::ALL {
            let config = SimConfig::published(60, strategy, 7);
            let first = simulate(&config);
            let second = simulate(&config);
            assert_eq!(first, second, "{strategy:?}");
            assert!(!first.truncated);
        }
        // ...and another seed gives another run, for the jittered ones at least.
        let one = simulate(&SimConfig::published(60, Strategy::FullJitter, 1));
        let two = simulate(&SimConfig::published(60, Strategy::FullJitter, 2));
        assert_ne!(one.call_times_ms, two.call_times_ms);
    }

    #[test]
    fn every_client_writes_exactly_once() {
        for strategy in Strategy::ALL {
            let result = simulate(&SimConfig::published(50, strategy, 3));
            assert_eq!(result.calls - result.failures, 50, "{strategy:?}");
            assert_eq!(result.call_times_ms.len() as u64, result.calls);
            assert!(
                result
                    .call_times_ms
                    .windows(2)
                    .all(|pair| pair[0] <= pair[1]),
                "calls are recorded in time order"
            );
            assert!(result.completion_ms >= result.call_times_ms[0]);
        }
    }

    #[test]
    fn ordering_at_100_clients_matches_the_published_one() {
        let mean_calls = |strategy| average(&SimConfig::published(100, strategy, 1000), 20).calls;
        let none = mean_calls(Strategy::None);
        let exponential = mean_calls(Strategy::Exponential);
        let full = mean_calls(Strategy::FullJitter);
        let equal = mean_calls(Strategy::EqualJitter);
        let decorrelated = mean_calls(Strategy::Decorrelated);
        // Full jitter needs far fewer calls than exponential without jitter
        // ("more than halves"), which needs fewer than no backoff at all.
        assert!(
            full * 2.0 < exponential,
            "full {full} vs exponential {exponential}"
        );
        assert!(
            exponential < none,
            "exponential {exponential} vs none {none}"
        );
        // Without backoff the work grows with the square of the clients:
        // doubling them far more than doubles the calls (4x if exactly N²).
        let none_at_50 = average(&SimConfig::published(50, Strategy::None, 1000), 20).calls;
        assert!(
            none > 3.0 * none_at_50,
            "none {none} at 100, {none_at_50} at 50"
        );
        // Every jittered strategy beats the unjittered ones.
        for jittered in [full, equal, decorrelated] {
            assert!(jittered < exponential, "{jittered} vs {exponential}");
        }
    }

    #[test]
    fn backoff_windows_follow_their_formulas() {
        let mut rng = SplitMix64::new(9);
        assert_eq!(
            backoff_ms(Strategy::None, 3, 5.0, 2000.0, 5.0, &mut rng),
            0.0
        );
        assert_eq!(
            backoff_ms(Strategy::Exponential, 3, 5.0, 2000.0, 5.0, &mut rng),
            40.0
        );
        assert_eq!(
            backoff_ms(Strategy::Exponential, 60, 5.0, 2000.0, 5.0, &mut rng),
            2000.0
        );
        for _ in 0..1000 {
            let full = backoff_ms(Strategy::FullJitter, 3, 5.0, 2000.0, 5.0, &mut rng);
            assert!((0.0..40.0).contains(&full));
            let equal = backoff_ms(Strategy::EqualJitter, 3, 5.0, 2000.0, 5.0, &mut rng);
            assert!((20.0..40.0).contains(&equal));
            let decorrelated = backoff_ms(Strategy::Decorrelated, 3, 5.0, 2000.0, 100.0, &mut rng);
            assert!((5.0..300.0).contains(&decorrelated));
        }
    }

    #[test]
    fn histograms_count_every_call() {
        let result = simulate(&SimConfig::published(40, Strategy::Exponential, 5));
        let per_bucket = result.calls_per_bucket(10.0);
        assert_eq!(
            per_bucket.iter().map(|&n| u64::from(n)).sum::<u64>(),
            result.calls
        );
        let fixed = result.histogram(result.completion_ms, 50);
        assert_eq!(fixed.len(), 50);
        assert_eq!(
            fixed.iter().map(|&n| u64::from(n)).sum::<u64>(),
            result.calls
        );
        assert_eq!(
            Strategy::from_name("full-jitter"),
            Some(Strategy::FullJitter)
        );
        assert_eq!(Strategy::from_index(0), Some(Strategy::None));
        assert_eq!(Strategy::from_index(5), Some(Strategy::Constant));
        assert_eq!(Strategy::from_index(6), None);
    }
}
