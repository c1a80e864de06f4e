//! The overload widget's simulation: a service that enriches each request by
//! calling one of two providers, "fast" and "flaky", with a per-call timeout,
//! an optional concurrency limit (shared, or a bulkhead per provider) and an
//! optional circuit breaker ([`crate::breaker::Breaker`]) in front of the
//! flaky one. Seeded and discrete-event: the same configuration and seed give
//! the same run, natively and in wasm.
//!
//! The life of a call, in the order Resilience4j's Spring Boot aspects stack
//! these (breaker outside the timeout, the timeout outside the bulkhead; its
//! "Aspect order" at <https://resilience4j.readme.io/docs/getting-started-3>):
//! 1. It arrives (Poisson, half the requests for each provider).
//! 2. The breaker, if any, may refuse it: it fails at once, reaches nothing.
//! 3. The timeout starts: it covers everything from here on.
//! 4. It takes a slot of its limit, or waits for one in a FIFO queue.
//! 5. The provider serves it on one of its workers, or queues it until one
//!    is free. In the failure window the flaky provider fails some calls
//!    fast, or hangs on them.
//! 6. It ends with the provider's answer or with its timeout, whichever is
//!    first. At the timeout the service closes the connection and the
//!    provider drops the work (as hyper drops a handler's future), so a
//!    timed-out call leaves nothing behind; its slot goes to the next waiter.

use std::{
    cmp::Ordering,
    collections::{BinaryHeap, VecDeque},
};

use seeded_rng::SplitMix64;

pub(crate) mod config;
mod random;

pub use crate::report::{OverloadBucket, OverloadRun, ProviderTotals};
use crate::{
    breaker::{Breaker, BreakerState, Permit},
    report::{CallEnd, RunRecorder},
};
pub use config::{
    ConcurrencyLimit, FailureMode, FailureWindow, OverloadSimConfig, Provider, ProviderConfig,
};
use random::exponential;

/// Where a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// In the service's queue for a slot of its limit.
    Waiting,
    /// At the provider, waiting for a worker.
    Queued,
    /// On a provider's worker.
    InService,
    Done,
}

#[derive(Debug)]
struct Call {
    provider: Provider,
    arrived_ms: f64,
    permit: Option<Permit>,
    stage: Stage,
    /// Whether it holds a slot of its pool, to give back when it ends.
    holds_slot: bool,
}

#[derive(Debug, Clone, Copy)]
enum Happening {
    Arrival(Provider),
    /// The provider's answer; ignored if the call ended before it.
    Answer {
        call: usize,
        success: bool,
    },
    Timeout {
        call: usize,
    },
}

#[derive(Debug)]
struct Scheduled {
    at_ms: f64,
    /// Ties at the same time go in the order they were scheduled.
    seq: u64,
    happening: Happening,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Scheduled) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Scheduled {}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Scheduled) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scheduled {
    /// Reversed, so that the max-heap pops the earliest first.
    fn cmp(&self, other: &Scheduled) -> Ordering {
        other
            .at_ms
            .total_cmp(&self.at_ms)
            .then(other.seq.cmp(&self.seq))
    }
}

/// A pool of slots with its FIFO queue. Calls that left the queue (timed
/// out) stay in it until they reach the front and are skipped there;
/// `waiting` counts the live ones.
#[derive(Debug)]
struct Pool {
    slots: usize,
    held: usize,
    queue: VecDeque<usize>,
    waiting: usize,
}

/// A provider: `workers` at a time, the rest in its queue (the same lazy
/// removal as [`Pool`]); `in_flight` counts calls queued or in service.
#[derive(Debug)]
struct Station {
    workers: usize,
    busy: usize,
    queue: VecDeque<usize>,
    in_flight: usize,
}

struct Engine<'a> {
    config: &'a OverloadSimConfig,
    now_ms: f64,
    seq: u64,
    events: BinaryHeap<Scheduled>,
    calls: Vec<Call>,
    pools: Vec<Pool>,
    pool_of: [Option<usize>; 2],
    stations: [Station; 2],
    breaker: Option<Breaker>,
    /// One stream per provider for arrivals, so that two configurations with
    /// the same seed see the same requests; one for how calls go.
    arrivals: [SplitMix64; 2],
    service: SplitMix64,
    recorder: RunRecorder,
}

/// Runs the simulation.
pub fn simulate(config: &OverloadSimConfig) -> OverloadRun {
    let (slots, pool_of) = config.limit.pools();
    let station = |provider: Provider| Station {
        workers: config.provider(provider).workers.max(1),
        busy: 0,
        queue: VecDeque::new(),
        in_flight: 0,
    };
    let mut engine = Engine {
        config,
        now_ms: 0.0,
        seq: 0,
        events: BinaryHeap::new(),
        calls: Vec::new(),
        pools: slots
            .into_iter()
            .map(|slots| Pool {
                slots: slots.max(1),
                held: 0,
                queue: VecDeque::new(),
                waiting: 0,
            })
            .collect(),
        pool_of,
        stations: [station(Provider::Fast), station(Provider::Flaky)],
        breaker: config.breaker.map(Breaker::new),
        arrivals: [
            SplitMix64::new(config.seed ^ 0xFA57_0000_0000_0001),
            SplitMix64::new(config.seed ^ 0xF1A4_0000_0000_0002),
        ],
        service: SplitMix64::new(config.seed ^ 0x5E41_0000_0000_0003),
        recorder: RunRecorder::new(config.duration_ms, config.bucket_ms),
    };
    for provider in Provider::ALL {
        engine.schedule_arrival(provider);
    }
    while let Some(next) = engine.events.pop() {
        if next.at_ms >= config.duration_ms {
            break;
        }
        engine.now_ms = next.at_ms;
        let state = engine.breaker_state();
        engine.recorder.advance(next.at_ms, state);
        match next.happening {
            Happening::Arrival(provider) => engine.arrive(provider),
            Happening::Answer { call, success } => engine.answer(call, success),
            Happening::Timeout { call } => engine.time_out(call),
        }
        engine.observe();
    }
    engine.now_ms = config.duration_ms;
    let state = engine.breaker_state();
    engine.recorder.advance(config.duration_ms, state);
    let mut unfinished = [0; 2];
    for call in engine.calls.iter().filter(|call| call.stage != Stage::Done) {
        unfinished[call.provider.index()] += 1;
    }
    let transitions = engine
        .breaker
        .as_ref()
        .map(|breaker| breaker.transitions().to_vec())
        .unwrap_or_default();
    engine.recorder.finish(unfinished, transitions)
}

impl Engine<'_> {
    fn schedule(&mut self, at_ms: f64, happening: Happening) {
        self.seq += 1;
        self.events.push(Scheduled {
            at_ms,
            seq: self.seq,
            happening,
        });
    }

    fn schedule_arrival(&mut self, provider: Provider) {
        let per_ms = self.config.arrivals_per_s.max(0.0) / 2.0 / 1000.0;
        if per_ms <= 0.0 {
            return;
        }
        let gap = exponential(&mut self.arrivals[provider.index()], 1.0 / per_ms);
        self.schedule(self.now_ms + gap, Happening::Arrival(provider));
    }

    /// The breaker's clock is whole milliseconds.
    fn clock(&self) -> u64 {
        self.now_ms.max(0.0).floor() as u64
    }

    fn breaker_state(&mut self) -> BreakerState {
        let now = self.clock();
        match self.breaker.as_mut() {
            Some(breaker) => breaker.state(now),
            None => BreakerState::Closed,
        }
    }

    fn arrive(&mut self, provider: Provider) {
        self.schedule_arrival(provider);
        self.recorder.arrived(provider);
        let now = self.clock();
        let permit = match (provider, self.breaker.as_mut()) {
            (Provider::Flaky, Some(breaker)) => match breaker.try_acquire(now) {
                Some(permit) => Some(permit),
                None => {
                    self.recorder.refused(provider);
                    return;
                }
            },
            _ => None,
        };
        let call = self.calls.len();
        self.calls.push(Call {
            provider,
            arrived_ms: self.now_ms,
            permit,
            stage: Stage::Waiting,
            holds_slot: false,
        });
        if self.config.timeout_ms.is_finite() {
            self.schedule(
                self.now_ms + self.config.timeout_ms.max(0.0),
                Happening::Timeout { call },
            );
        }
        match self.pool_of[provider.index()] {
            Some(index) if self.pools[index].held >= self.pools[index].slots => {
                let pool = &mut self.pools[index];
                pool.queue.push_back(call);
                pool.waiting += 1;
            }
            Some(index) => {
                self.pools[index].held += 1;
                self.calls[call].holds_slot = true;
                self.send(call);
            }
            None => self.send(call),
        }
    }

    /// The call goes out to its provider.
    fn send(&mut self, call: usize) {
        let provider = self.calls[call].provider;
        self.recorder.sent(provider);
        let station = &mut self.stations[provider.index()];
        station.in_flight += 1;
        if station.busy < station.workers {
            self.start(call);
        } else {
            station.queue.push_back(call);
            self.calls[call].stage = Stage::Queued;
        }
    }

    /// A worker of the call's provider takes it.
    fn start(&mut self, call: usize) {
        let provider = self.calls[call].provider;
        self.stations[provider.index()].busy += 1;
        self.calls[call].stage = Stage::InService;
        let healthy = self.config.provider(provider).service_ms;
        let failure = self.config.failure;
        let (took_ms, success) = if provider == Provider::Flaky
            && failure.contains(self.now_ms)
            && self.service.unit() < failure.rate
        {
            match failure.mode {
                FailureMode::Fails => (failure.fail_ms * self.service.uniform(0.5, 1.5), false),
                FailureMode::Hangs => (failure.hang_ms, true),
            }
        } else {
            (healthy * self.service.uniform(0.5, 1.5), true)
        };
        self.schedule(
            self.now_ms + took_ms.max(0.0),
            Happening::Answer { call, success },
        );
    }

    fn answer(&mut self, call: usize, success: bool) {
        if self.calls[call].stage != Stage::InService {
            return;
        }
        self.leave_provider(call);
        self.end(
            call,
            if success {
                CallEnd::Ok
            } else {
                CallEnd::Failed
            },
        );
    }

    fn time_out(&mut self, call: usize) {
        match self.calls[call].stage {
            Stage::Done => return,
            Stage::Waiting => {
                let index = self.pool_of[self.calls[call].provider.index()]
                    .expect("only a call with a pool waits for a slot");
                self.pools[index].waiting -= 1;
            }
            Stage::Queued | Stage::InService => self.leave_provider(call),
        }
        self.end(call, CallEnd::TimedOut);
    }

    /// The provider is done with the call (answered or dropped): its worker,
    /// if it had one, takes the next live call in the provider's queue.
    fn leave_provider(&mut self, call: usize) {
        let provider = self.calls[call].provider;
        let was_in_service = self.calls[call].stage == Stage::InService;
        // Marked before the queue is searched, so a dropped call is skipped.
        self.calls[call].stage = Stage::Done;
        let station = &mut self.stations[provider.index()];
        station.in_flight -= 1;
        if !was_in_service {
            return;
        }
        station.busy -= 1;
        while let Some(next) = self.stations[provider.index()].queue.pop_front() {
            if self.calls[next].stage == Stage::Queued {
                self.start(next);
                break;
            }
        }
    }

    /// The call's outcome is known: tell the breaker, count it, and hand its
    /// slot to the first live waiter.
    fn end(&mut self, call: usize, ending: CallEnd) {
        let now = self.clock();
        let Call {
            provider,
            arrived_ms,
            permit,
            holds_slot,
            ..
        } = self.calls[call];
        self.calls[call].stage = Stage::Done;
        if let (Some(permit), Some(breaker)) = (permit, self.breaker.as_mut()) {
            breaker.record(permit, now, ending == CallEnd::Ok);
        }
        self.recorder
            .ended(provider, ending, self.now_ms - arrived_ms);
        if !holds_slot {
            return;
        }
        self.calls[call].holds_slot = false;
        let index = self.pool_of[provider.index()].expect("a slot belongs to a pool");
        self.pools[index].held -= 1;
        while let Some(next) = self.pools[index].queue.pop_front() {
            if self.calls[next].stage == Stage::Waiting {
                self.pools[index].waiting -= 1;
                self.pools[index].held += 1;
                self.calls[next].holds_slot = true;
                self.send(next);
                break;
            }
        }
    }

    /// Tells the recorder the levels after an event, for the peaks.
    fn observe(&mut self) {
        let in_flight = [self.stations[0].in_flight, self.stations[1].in_flight];
        let waiting = self.pools.iter().map(|pool| pool.waiting).sum();
        self.recorder.levels(in_flight, waiting);
    }
}
