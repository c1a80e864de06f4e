//! The overload simulation's inputs: the providers, the flaky one's failure
//! window, the service's concurrency limit and timeout, and the breaker.

use crate::breaker::BreakerConfig;

/// The two providers the service calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    Fast,
    Flaky,
}

impl Provider {
    pub const ALL: [Provider; 2] = [Provider::Fast, Provider::Flaky];

    pub fn name(self) -> &'static str {
        match self {
            Provider::Fast => "fast",
            Provider::Flaky => "flaky",
        }
    }

    /// Its place in the per-provider arrays of [`OverloadBucket`] and
    /// [`OverloadRun`].
    pub fn index(self) -> usize {
        match self {
            Provider::Fast => 0,
            Provider::Flaky => 1,
        }
    }
}

/// What the flaky provider does to a failing call inside the failure window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureMode {
    /// Answers an error after `fail_ms`: cheap for the caller.
    Fails,
    /// Holds the call for `hang_ms` and then answers: only the timeout and
    /// the limits protect the caller.
    Hangs,
}

impl FailureMode {
    pub const ALL: [FailureMode; 2] = [FailureMode::Fails, FailureMode::Hangs];

    pub fn name(self) -> &'static str {
        match self {
            FailureMode::Fails => "fails",
            FailureMode::Hangs => "hangs",
        }
    }

    pub fn named(name: &str) -> Option<FailureMode> {
        FailureMode::ALL
            .into_iter()
            .find(|mode| mode.name() == name)
    }
}

/// A provider's capacity: calls beyond `workers` wait in its own queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProviderConfig {
    pub workers: usize,
    /// The mean time a healthy call takes; each call takes 0.5 to 1.5 times it.
    pub service_ms: f64,
}

/// When and how the flaky provider misbehaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FailureWindow {
    pub mode: FailureMode,
    /// Calls that start service in `start_ms..end_ms` may fail.
    pub start_ms: f64,
    pub end_ms: f64,
    /// The share (0 to 1) of those calls that fail or hang.
    pub rate: f64,
    /// How long a failing call takes to answer its error (mean, as service).
    pub fail_ms: f64,
    /// How long a hanging call holds its worker before it answers.
    pub hang_ms: f64,
}

impl FailureWindow {
    pub(super) fn contains(&self, at_ms: f64) -> bool {
        at_ms >= self.start_ms && at_ms < self.end_ms
    }
}

/// The service's concurrency limit: how many calls may be out at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConcurrencyLimit {
    /// Every call goes straight to its provider.
    None,
    /// One pool of slots for both providers.
    Shared(usize),
    /// A bulkhead: each provider has its own pool.
    PerProvider { fast: usize, flaky: usize },
}

impl ConcurrencyLimit {
    pub fn name(self) -> &'static str {
        match self {
            ConcurrencyLimit::None => "none",
            ConcurrencyLimit::Shared(_) => "shared",
            ConcurrencyLimit::PerProvider { .. } => "per-provider",
        }
    }

    /// The pools this limit makes, and which of them a provider's calls use.
    pub(super) fn pools(self) -> (Vec<usize>, [Option<usize>; 2]) {
        match self {
            ConcurrencyLimit::None => (Vec::new(), [None, None]),
            ConcurrencyLimit::Shared(slots) => (vec![slots], [Some(0), Some(0)]),
            ConcurrencyLimit::PerProvider { fast, flaky } => {
                (vec![fast, flaky], [Some(0), Some(1)])
            }
        }
    }
}

/// One run's inputs. [`OverloadSimConfig::default`] is the widget's starting point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverloadSimConfig {
    pub seed: u64,
    /// Requests arrive in `0..duration_ms`; what is still out then is unfinished.
    pub duration_ms: f64,
    /// The width of each [`OverloadBucket`].
    pub bucket_ms: f64,
    /// Requests per second for both providers together, half for each.
    pub arrivals_per_s: f64,
    pub fast: ProviderConfig,
    pub flaky: ProviderConfig,
    pub failure: FailureWindow,
    /// The service's deadline for a call, from the moment it passes the
    /// breaker; infinite for none.
    pub timeout_ms: f64,
    pub limit: ConcurrencyLimit,
    /// A breaker in front of the flaky provider, or none.
    pub breaker: Option<BreakerConfig>,
}

impl Default for OverloadSimConfig {
    /// A minute at 200 requests/s, both providers with 16 workers and 20 ms
    /// calls (an eighth of their capacity), a failure window from 20 s to
    /// 40 s in which half the flaky calls hang for 5 s, a 1 s timeout, a
    /// shared limit of 20 slots and no breaker: the bulkhead's bad case.
    fn default() -> OverloadSimConfig {
        OverloadSimConfig {
            seed: 1,
            duration_ms: 60_000.0,
            bucket_ms: 250.0,
            arrivals_per_s: 200.0,
            fast: ProviderConfig {
                workers: 16,
                service_ms: 20.0,
            },
            flaky: ProviderConfig {
                workers: 16,
                service_ms: 20.0,
            },
            failure: FailureWindow {
                mode: FailureMode::Hangs,
                start_ms: 20_000.0,
                end_ms: 40_000.0,
                rate: 0.5,
                fail_ms: 5.0,
                hang_ms: 5_000.0,
            },
            timeout_ms: 1_000.0,
            limit: ConcurrencyLimit::Shared(20),
            breaker: None,
        }
    }
}

impl OverloadSimConfig {
    pub fn provider(&self, provider: Provider) -> &ProviderConfig {
        match provider {
            Provider::Fast => &self.fast,
            Provider::Flaky => &self.flaky,
        }
    }

    /// A breaker that can reach a verdict within a one-minute run: the
    /// default's window and rate, 5 s open, 5 probes.
    pub fn quick_breaker() -> BreakerConfig {
        BreakerConfig {
            open_ms: 5_000,
            half_open_probes: 5,
            ..BreakerConfig::default()
        }
    }
}
