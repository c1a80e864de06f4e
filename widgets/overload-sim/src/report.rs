//! What a run of the overload simulation reports, and the recorder that
//! fills it in as the events go by: per time bucket (the widget's timeline)
//! and per provider for the whole run (its totals line).

use crate::{breaker::BreakerState, sim::config::Provider};

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallEnd {
    Ok,
    Failed,
    TimedOut,
}

/// One slice of time. The per-provider arrays are indexed by
/// [`Provider::index`]; counts are by the time a call ended.
#[derive(Debug, Clone, PartialEq)]
pub struct OverloadBucket {
    pub start_ms: f64,
    /// The breaker's state at the first event after the bucket (closed
    /// without a breaker); [`OverloadRun::transitions`] has the exact times.
    pub breaker: BreakerState,
    /// The most calls at each provider (queued there or in service) at once.
    pub in_flight: [usize; 2],
    /// The most calls waiting in the service for a slot at once.
    pub waiting: usize,
    pub ok: [u32; 2],
    /// The provider answered an error.
    pub failed: [u32; 2],
    /// The breaker failed the call fast.
    pub refused: [u32; 2],
    pub timed_out: [u32; 2],
    /// Calls that reached the provider (passed the breaker and the limit).
    pub sent: [u32; 2],
    /// The fast provider's calls' latencies, in the service, wait included:
    /// none if no fast call ended in the bucket.
    pub fast_p50_ms: Option<f64>,
    pub fast_p99_ms: Option<f64>,
}

/// One provider's calls over the whole run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderTotals {
    pub arrived: u32,
    pub ok: u32,
    pub failed: u32,
    pub refused: u32,
    pub timed_out: u32,
    pub sent: u32,
    /// Still out when the run ended.
    pub unfinished: u32,
    pub peak_in_flight: usize,
    /// Latency of the calls that ended (refused ones excluded: they never
    /// started), nearest rank.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

/// A whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct OverloadRun {
    pub buckets: Vec<OverloadBucket>,
    /// Indexed by [`Provider::index`]; see [`OverloadRun::totals`].
    pub totals: [ProviderTotals; 2],
    pub peak_waiting: usize,
    /// Every change of the breaker's state: when (ms), and to what.
    pub transitions: Vec<(u64, BreakerState)>,
}

impl OverloadRun {
    pub fn totals(&self, provider: Provider) -> &ProviderTotals {
        &self.totals[provider.index()]
    }

    /// Calls that reached `provider` in the buckets that start in
    /// `start_ms..end_ms`.
    pub fn sent_between(&self, provider: Provider, start_ms: f64, end_ms: f64) -> u32 {
        self.buckets
            .iter()
            .filter(|bucket| bucket.start_ms >= start_ms && bucket.start_ms < end_ms)
            .map(|bucket| bucket.sent[provider.index()])
            .sum()
    }
}

/// The nearest-rank percentile (`percent` in 0..=100) of `values`, sorted
/// in place.
pub fn percentile(values: &mut [f64], percent: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((percent / 100.0) * values.len() as f64).ceil() as usize;
    Some(values[rank.clamp(1, values.len()) - 1])
}

/// Fills in an [`OverloadRun`]; the engine calls [`RunRecorder::advance`] with
/// each event's time before it handles the event.
#[derive(Debug)]
pub(crate) struct RunRecorder {
    bucket_ms: f64,
    buckets: Vec<OverloadBucket>,
    /// The bucket events now fall in; `buckets.len()` once all are closed.
    current: usize,
    /// The fast provider's latencies in the current bucket.
    fast_latencies: Vec<f64>,
    latencies: [Vec<f64>; 2],
    totals: [ProviderTotals; 2],
    in_flight: [usize; 2],
    waiting: usize,
    peak_waiting: usize,
}

impl RunRecorder {
    pub(crate) fn new(duration_ms: f64, bucket_ms: f64) -> RunRecorder {
        let bucket_ms = if bucket_ms > 0.0 { bucket_ms } else { 1000.0 };
        let count = (duration_ms.max(0.0) / bucket_ms).ceil().max(1.0) as usize;
        let empty = |index: usize| OverloadBucket {
            start_ms: index as f64 * bucket_ms,
            breaker: BreakerState::Closed,
            in_flight: [0; 2],
            waiting: 0,
            ok: [0; 2],
            failed: [0; 2],
            refused: [0; 2],
            timed_out: [0; 2],
            sent: [0; 2],
            fast_p50_ms: None,
            fast_p99_ms: None,
        };
        RunRecorder {
            bucket_ms,
            buckets: (0..count).map(empty).collect(),
            current: 0,
            fast_latencies: Vec::new(),
            latencies: [Vec::new(), Vec::new()],
            totals: Default::default(),
            in_flight: [0; 2],
            waiting: 0,
            peak_waiting: 0,
        }
    }

    fn index(&self, at_ms: f64) -> usize {
        ((at_ms.max(0.0) / self.bucket_ms) as usize).min(self.buckets.len())
    }

    /// Closes every bucket that ended before `at_ms`, with the breaker in
    /// `state`; a new bucket starts with the levels the last one ended on.
    pub(crate) fn advance(&mut self, at_ms: f64, state: BreakerState) {
        let target = self.index(at_ms);
        while self.current < target {
            let bucket = &mut self.buckets[self.current];
            bucket.breaker = state;
            bucket.fast_p50_ms = percentile(&mut self.fast_latencies, 50.0);
            bucket.fast_p99_ms = percentile(&mut self.fast_latencies, 99.0);
            self.fast_latencies.clear();
            self.current += 1;
            if let Some(next) = self.buckets.get_mut(self.current) {
                next.in_flight = self.in_flight;
                next.waiting = self.waiting;
            }
        }
    }

    fn bucket(&mut self) -> Option<&mut OverloadBucket> {
        self.buckets.get_mut(self.current)
    }

    pub(crate) fn arrived(&mut self, provider: Provider) {
        self.totals[provider.index()].arrived += 1;
    }

    pub(crate) fn refused(&mut self, provider: Provider) {
        let index = provider.index();
        self.totals[index].refused += 1;
        if let Some(bucket) = self.bucket() {
            bucket.refused[index] += 1;
        }
    }

    pub(crate) fn sent(&mut self, provider: Provider) {
        let index = provider.index();
        self.totals[index].sent += 1;
        if let Some(bucket) = self.bucket() {
            bucket.sent[index] += 1;
        }
    }

    pub(crate) fn ended(&mut self, provider: Provider, ending: CallEnd, latency_ms: f64) {
        let index = provider.index();
        let totals = &mut self.totals[index];
        match ending {
            CallEnd::Ok => totals.ok += 1,
            CallEnd::Failed => totals.failed += 1,
            CallEnd::TimedOut => totals.timed_out += 1,
        }
        self.latencies[index].push(latency_ms);
        if provider == Provider::Fast {
            self.fast_latencies.push(latency_ms);
        }
        if let Some(bucket) = self.bucket() {
            match ending {
                CallEnd::Ok => bucket.ok[index] += 1,
                CallEnd::Failed => bucket.failed[index] += 1,
                CallEnd::TimedOut => bucket.timed_out[index] += 1,
            }
        }
    }

    /// The levels after an event, for the peaks.
    pub(crate) fn levels(&mut self, in_flight: [usize; 2], waiting: usize) {
        self.in_flight = in_flight;
        self.waiting = waiting;
        self.peak_waiting = self.peak_waiting.max(waiting);
        for (totals, level) in self.totals.iter_mut().zip(in_flight) {
            totals.peak_in_flight = totals.peak_in_flight.max(level);
        }
        if let Some(bucket) = self.bucket() {
            for (peak, level) in bucket.in_flight.iter_mut().zip(in_flight) {
                *peak = (*peak).max(level);
            }
            bucket.waiting = bucket.waiting.max(waiting);
        }
    }

    pub(crate) fn finish(
        mut self,
        unfinished: [u32; 2],
        transitions: Vec<(u64, BreakerState)>,
    ) -> OverloadRun {
        let calls = self
            .totals
            .iter_mut()
            .zip(&mut self.latencies)
            .zip(unfinished);
        for ((totals, latencies), unfinished) in calls {
            totals.unfinished = unfinished;
            totals.p50_ms = percentile(latencies, 50.0);
            totals.p99_ms = percentile(latencies, 99.0);
        }
        OverloadRun {
            buckets: self.buckets,
            totals: self.totals,
            peak_waiting: self.peak_waiting,
            transitions,
        }
    }
}
