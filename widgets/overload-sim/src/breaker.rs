//! A circuit breaker as a state machine over the caller's clock.
//!
//! Closed, it lets every call through and remembers the last `window`
//! outcomes; once at least `min_calls` of them are known and the share of
//! failures reaches `failure_rate`, it opens. Open, it refuses every call for
//! `open_ms`. Then it is half-open: it lets `half_open_probes` calls through
//! and refuses the rest; if every probe succeeds it closes with an empty
//! window, and the first failed probe opens it again for another `open_ms`.
//! This is the count-based breaker of Resilience4j and Polly, small enough to
//! read in one sitting.

use std::collections::VecDeque;

/// When the breaker opens, and for how long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerConfig {
    /// How many of the latest outcomes the closed breaker remembers.
    pub window: usize,
    /// No verdict on fewer outcomes than this.
    pub min_calls: usize,
    /// The share of failures in the window (0 to 1) that opens the breaker.
    pub failure_rate: f64,
    /// How long an open breaker refuses calls before it probes.
    pub open_ms: u64,
    /// How many calls a half-open breaker lets through as probes.
    pub half_open_probes: usize,
}

impl Default for BreakerConfig {
    /// Resilience4j's count-based breaker defaults to 50 % failures over a
    /// window of 100 calls, no verdict before 100 calls, 60 s open and 10
    /// probes (its CircuitBreakerConfig, documented at
    /// <https://resilience4j.readme.io/docs/circuitbreaker>). Here the rate,
    /// the open time and the probes are its; the window is 20 and the
    /// minimum 10, so that a lab sees a verdict in seconds.
    fn default() -> BreakerConfig {
        BreakerConfig {
            window: 20,
            min_calls: 10,
            failure_rate: 0.5,
            open_ms: 60_000,
            half_open_probes: 10,
        }
    }
}

/// The breaker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    pub fn name(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half-open",
        }
    }
}

/// The ticket of a call the breaker let through, to hand back with its
/// outcome. An outcome from before the breaker last changed state is ignored:
/// a slow call that started while closed says nothing about a half-open one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "hand the permit back with `Breaker::record`"]
pub struct Permit {
    generation: u64,
}

/// A circuit breaker; see the module docs for its rules.
#[derive(Debug, Clone)]
pub struct Breaker {
    config: BreakerConfig,
    state: BreakerState,
    /// Bumped at every change of state; see [`Permit`].
    generation: u64,
    /// Closed: the latest outcomes, `true` for a failure.
    outcomes: VecDeque<bool>,
    /// Open: when it may probe.
    open_until_ms: u64,
    /// Half-open: probes let through, and probes that came back well.
    probes_sent: usize,
    probes_passed: usize,
    /// Every change of state: when, and to what.
    transitions: Vec<(u64, BreakerState)>,
}

impl Breaker {
    pub fn new(config: BreakerConfig) -> Breaker {
        assert!(config.window > 0 && config.min_calls <= config.window);
        assert!(config.half_open_probes > 0);
        Breaker {
            config,
            state: BreakerState::Closed,
            generation: 0,
            outcomes: VecDeque::with_capacity(config.window),
            open_until_ms: 0,
            probes_sent: 0,
            probes_passed: 0,
            transitions: Vec::new(),
        }
    }

    pub fn config(&self) -> &BreakerConfig {
        &self.config
    }

    /// The state at `now_ms`: an open breaker whose time is up is half-open.
    pub fn state(&mut self, now_ms: u64) -> BreakerState {
        if self.state == BreakerState::Open && now_ms >= self.open_until_ms {
            self.enter(BreakerState::HalfOpen, now_ms);
        }
        self.state
    }

    /// May a call go now? `None` means fail fast: do not call, and do not
    /// retry what the breaker refused.
    pub fn try_acquire(&mut self, now_ms: u64) -> Option<Permit> {
        match self.state(now_ms) {
            BreakerState::Closed => Some(self.permit()),
            BreakerState::Open => None,
            BreakerState::HalfOpen if self.probes_sent < self.config.half_open_probes => {
                self.probes_sent += 1;
                Some(self.permit())
            }
            BreakerState::HalfOpen => None,
        }
    }

    /// The outcome of a call `try_acquire` let through.
    pub fn record(&mut self, permit: Permit, now_ms: u64, success: bool) {
        if permit.generation != self.generation {
            return;
        }
        match self.state {
            BreakerState::Closed => {
                if self.outcomes.len() == self.config.window {
                    self.outcomes.pop_front();
                }
                self.outcomes.push_back(!success);
                let failures = self.outcomes.iter().filter(|failed| **failed).count();
                let known = self.outcomes.len();
                if known >= self.config.min_calls
                    && failures as f64 >= self.config.failure_rate * known as f64
                {
                    self.open(now_ms);
                }
            }
            // The generation changed when it opened, so no permit matches.
            BreakerState::Open => {}
            BreakerState::HalfOpen if !success => self.open(now_ms),
            BreakerState::HalfOpen => {
                self.probes_passed += 1;
                if self.probes_passed == self.config.half_open_probes {
                    self.enter(BreakerState::Closed, now_ms);
                }
            }
        }
    }

    /// Every change of state so far: when, and to what.
    pub fn transitions(&self) -> &[(u64, BreakerState)] {
        &self.transitions
    }

    fn permit(&self) -> Permit {
        Permit {
            generation: self.generation,
        }
    }

    fn open(&mut self, now_ms: u64) {
        self.open_until_ms = now_ms + self.config.open_ms;
        self.enter(BreakerState::Open, now_ms);
    }

    fn enter(&mut self, state: BreakerState, now_ms: u64) {
        self.state = state;
        self.generation += 1;
        self.outcomes.clear();
        self.probes_sent = 0;
        self.probes_passed = 0;
        self.transitions.push((now_ms, state));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BreakerState::{Closed, HalfOpen, Open};

    fn small() -> BreakerConfig {
        BreakerConfig {
            window: 4,
            min_calls: 4,
            failure_rate: 0.5,
            open_ms: 100,
            half_open_probes: 2,
        }
    }

    fn call(breaker: &mut Breaker, now_ms: u64, success: bool) -> bool {
        match breaker.try_acquire(now_ms) {
            Some(permit) => {
                breaker.record(permit, now_ms, success);
                true
            }
            None => false,
        }
    }

    #[test]
    fn opens_only_once_the_window_has_enough_calls_and_failures() {
        let mut breaker = Breaker::new(small());
        assert!(call(&mut breaker, 0, false));
        assert!(call(&mut breaker, 1, true));
        assert!(call(&mut breaker, 2, true));
        assert_eq!(breaker.state(3), Closed, "3 calls: no verdict");
        assert!(call(&mut breaker, 3, false));
        assert_eq!(breaker.state(3), Open, "2 of 4 failed");
        assert!(!call(&mut breaker, 50, true), "open refuses");
    }

    #[test]
    fn half_open_closes_after_all_probes_pass_and_reopens_on_one_failure() {
        let mut breaker = Breaker::new(small());
        for t in 0..4 {
            call(&mut breaker, t, false);
        }
        assert_eq!(breaker.state(99), Open);
        assert_eq!(breaker.state(103), HalfOpen);
        let first = breaker.try_acquire(103).expect("first probe");
        let second = breaker.try_acquire(103).expect("second probe");
        assert!(breaker.try_acquire(103).is_none(), "only two probes");
        breaker.record(first, 104, true);
        assert_eq!(breaker.state(104), HalfOpen);
        breaker.record(second, 105, false);
        assert_eq!(breaker.state(105), Open, "a failed probe reopens");
        assert_eq!(breaker.state(205), HalfOpen);
        assert!(call(&mut breaker, 205, true));
        assert!(call(&mut breaker, 206, true));
        assert_eq!(breaker.state(206), Closed);
        let states: Vec<BreakerState> = breaker.transitions().iter().map(|(_, s)| *s).collect();
        assert_eq!(states, [Open, HalfOpen, Open, HalfOpen, Closed]);
    }

    #[test]
    fn an_outcome_from_before_a_change_of_state_is_ignored() {
        let mut breaker = Breaker::new(small());
        let slow = breaker.try_acquire(0).expect("closed");
        for t in 0..4 {
            call(&mut breaker, t, false);
        }
        assert_eq!(breaker.state(150), HalfOpen);
        breaker.record(slow, 150, false);
        assert_eq!(breaker.state(150), HalfOpen, "stale failure ignored");
    }
}
