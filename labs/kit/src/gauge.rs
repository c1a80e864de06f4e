//! A gauge of things in flight and the most there ever were at once: the
//! number a bulkhead promises to bound and a provider's operators watch.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

/// Things in flight now, and the peak; cheap to clone (one shared count).
#[derive(Debug, Clone, Default)]
pub struct Gauge(Arc<Counts>);

#[derive(Debug, Default)]
struct Counts {
    now: AtomicU64,
    peak: AtomicU64,
}

impl Gauge {
    pub fn new() -> Gauge {
        Gauge::default()
    }

    /// One more in flight until the guard drops (a cancelled future drops
    /// it too, so a handler that hyper abandons leaves the gauge).
    pub fn enter(&self) -> InFlight {
        let now = self.0.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.0.peak.fetch_max(now, Ordering::SeqCst);
        InFlight {
            counts: Arc::clone(&self.0),
            on_entry: now,
        }
    }

    pub fn now(&self) -> u64 {
        self.0.now.load(Ordering::SeqCst)
    }

    pub fn peak(&self) -> u64 {
        self.0.peak.load(Ordering::SeqCst)
    }

    /// Forgets the peak: the next one is measured from what is in flight now.
    pub fn reset_peak(&self) {
        self.0.peak.store(self.now(), Ordering::SeqCst);
    }
}

/// One thing in flight; see [`Gauge::enter`].
#[derive(Debug)]
#[must_use = "the gauge counts this until it drops"]
pub struct InFlight {
    counts: Arc<Counts>,
    on_entry: u64,
}

impl InFlight {
    /// How many were in flight, this one included, the moment it entered:
    /// what a caller that refuses past a limit compares.
    pub fn on_entry(&self) -> u64 {
        self.on_entry
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.counts.now.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_is_held_and_keeps_the_peak() {
        let gauge = Gauge::new();
        let first = gauge.enter();
        let second = gauge.enter();
        assert_eq!((first.on_entry(), second.on_entry()), (1, 2));
        assert_eq!((gauge.now(), gauge.peak()), (2, 2));
        drop(first);
        drop(second);
        let _third = gauge.enter();
        assert_eq!((gauge.now(), gauge.peak()), (1, 2));
        gauge.reset_peak();
        assert_eq!(gauge.peak(), 1);
    }
}
