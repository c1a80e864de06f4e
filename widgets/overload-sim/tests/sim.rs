//! The overload simulation's mechanisms, asserted with margins: the bulkhead
//! isolates the fast provider from the hanging one, the limits hold, the
//! breaker opens in the failure window and closes after it, and a seed is a run.

use overload_sim::{
    breaker::BreakerState,
    sim::{ConcurrencyLimit, FailureMode, OverloadRun, OverloadSimConfig, Provider, simulate},
};

const FAST: Provider = Provider::Fast;
const FLAKY: Provider = Provider::Flaky;

fn hanging(limit: ConcurrencyLimit) -> OverloadSimConfig {
    OverloadSimConfig {
        limit,
        ..OverloadSimConfig::default()
    }
}

fn p99(run: &OverloadRun, provider: Provider) -> f64 {
    run.totals(provider).p99_ms.expect("calls ended")
}

#[test]
fn per_provider_limits_keep_the_fast_p99_far_below_a_shared_limit() {
    let shared = simulate(&hanging(ConcurrencyLimit::Shared(20)));
    let isolated = simulate(&hanging(ConcurrencyLimit::PerProvider {
        fast: 20,
        flaky: 20,
    }));
    let (shared_p99, isolated_p99) = (p99(&shared, FAST), p99(&isolated, FAST));
    // Shared: hung flaky calls hold the slots, fast calls queue behind them
    // for most of the timeout (1 s); isolated: a fast call takes at most 30 ms.
    assert!(shared_p99 >= 500.0, "shared p99 {shared_p99} ms");
    assert!(isolated_p99 <= 100.0, "isolated p99 {isolated_p99} ms");
    assert!(shared_p99 >= 5.0 * isolated_p99);
    // They wait for a slot behind flaky calls that hold theirs until the
    // timeout, so most of the window's buckets show it.
    let window = &shared.buckets[84..156];
    let slow = window
        .iter()
        .filter(|bucket| bucket.fast_p99_ms.is_some_and(|ms| ms >= 300.0))
        .count();
    assert!(
        slow * 2 >= window.len(),
        "{slow} of {} slow buckets",
        window.len()
    );
    assert_eq!(
        isolated.totals(FAST).timed_out,
        0,
        "{:?}",
        isolated.totals(FAST)
    );
    // Outside the failure window the shared limit hurts nobody.
    let calm: Vec<f64> = shared.buckets[..70]
        .iter()
        .filter_map(|bucket| bucket.fast_p99_ms)
        .collect();
    assert!(calm.iter().all(|&ms| ms <= 100.0), "{calm:?}");
}

#[test]
fn per_provider_limits_cap_what_each_provider_holds() {
    for mode in FailureMode::ALL {
        // A fast limit of 3 binds: 100 calls/s of 20 ms want 2 on average.
        let mut config = hanging(ConcurrencyLimit::PerProvider { fast: 3, flaky: 12 });
        config.failure.mode = mode;
        let run = simulate(&config);
        assert_eq!(run.totals(FAST).peak_in_flight, 3, "{mode:?}");
        assert!(run.totals(FLAKY).peak_in_flight <= 12, "{mode:?}");
        assert!(run.buckets.iter().all(|bucket| bucket.in_flight[0] <= 3));
        assert!(run.peak_waiting > 0, "{mode:?}: the limit made calls wait");
    }
    // Without a limit the hung flaky calls pile up at the provider.
    let unlimited = simulate(&hanging(ConcurrencyLimit::None));
    assert!(
        unlimited.totals(FLAKY).peak_in_flight >= 60,
        "{:?}",
        unlimited.totals(FLAKY)
    );
    assert_eq!(unlimited.peak_waiting, 0);
}

#[test]
fn the_breaker_opens_in_the_failure_window_and_closes_after_it() {
    for mode in FailureMode::ALL {
        let mut config = hanging(ConcurrencyLimit::PerProvider {
            fast: 20,
            flaky: 20,
        });
        config.failure.mode = mode;
        config.breaker = Some(OverloadSimConfig::quick_breaker());
        let (start, end) = (config.failure.start_ms as u64, config.failure.end_ms as u64);
        let run = simulate(&config);
        let transitions = &run.transitions;
        let (opened, _) = transitions
            .iter()
            .find(|(_, state)| *state == BreakerState::Open)
            .unwrap_or_else(|| panic!("{mode:?}: never opened: {transitions:?}"));
        assert!(
            *opened >= start && *opened <= start + 3_000,
            "{mode:?} opened at {opened}"
        );
        let &(closed, last) = transitions.last().expect("transitions");
        assert_eq!(last, BreakerState::Closed, "{mode:?}: {transitions:?}");
        assert!(
            closed >= end && closed <= end + 8_000,
            "{mode:?} closed at {closed}"
        );
        assert!(
            run.totals(FLAKY).refused > 1_000,
            "{mode:?}: {:?}",
            run.totals(FLAKY)
        );
        let final_bucket = run.buckets.last().expect("buckets");
        assert_eq!(final_bucket.breaker, BreakerState::Closed);
        assert!(
            run.buckets
                .iter()
                .any(|bucket| bucket.breaker == BreakerState::Open)
        );
    }
}

#[test]
fn the_breaker_cuts_the_calls_that_reach_the_flaky_provider_in_the_window() {
    let mut config = hanging(ConcurrencyLimit::PerProvider {
        fast: 20,
        flaky: 20,
    });
    let (start, end) = (config.failure.start_ms, config.failure.end_ms);
    let without = simulate(&config);
    config.breaker = Some(OverloadSimConfig::quick_breaker());
    let with = simulate(&config);
    let (reached_without, reached_with) = (
        without.sent_between(FLAKY, start, end),
        with.sent_between(FLAKY, start, end),
    );
    assert!(
        reached_with * 5 <= reached_without,
        "{reached_with} vs {reached_without}"
    );
    // Before the window the breaker changes nothing.
    assert_eq!(
        without.sent_between(FLAKY, 0.0, start),
        with.sent_between(FLAKY, 0.0, start)
    );
}

#[test]
fn every_call_is_accounted_for_in_the_totals_and_the_buckets() {
    let mut config = hanging(ConcurrencyLimit::Shared(20));
    config.breaker = Some(OverloadSimConfig::quick_breaker());
    let run = simulate(&config);
    for provider in Provider::ALL {
        let totals = run.totals(provider);
        let ended = totals.ok + totals.failed + totals.refused + totals.timed_out;
        assert_eq!(
            ended + totals.unfinished,
            totals.arrived,
            "{provider:?}: {totals:?}"
        );
        let index = provider.index();
        let sum = |field: fn(&overload_sim::sim::OverloadBucket) -> [u32; 2]| -> u32 {
            run.buckets.iter().map(|bucket| field(bucket)[index]).sum()
        };
        assert_eq!(sum(|bucket| bucket.ok), totals.ok);
        assert_eq!(sum(|bucket| bucket.timed_out), totals.timed_out);
        assert_eq!(sum(|bucket| bucket.refused), totals.refused);
        assert_eq!(sum(|bucket| bucket.sent), totals.sent);
        // 100 requests/s each for 60 s, within a few percent.
        assert!((5_500..6_500).contains(&totals.arrived), "{totals:?}");
    }
    assert_eq!(run.buckets.len(), 240);
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let mut config = hanging(ConcurrencyLimit::Shared(20));
    config.breaker = Some(OverloadSimConfig::quick_breaker());
    assert_eq!(simulate(&config), simulate(&config));
    let other = OverloadSimConfig { seed: 2, ..config };
    assert_ne!(simulate(&config).totals, simulate(&other).totals);
    // The arrivals do not depend on the limit: the same requests either way.
    let isolated = OverloadSimConfig {
        limit: ConcurrencyLimit::PerProvider {
            fast: 20,
            flaky: 20,
        },
        ..config
    };
    for provider in Provider::ALL {
        assert_eq!(
            simulate(&config).totals(provider).arrived,
            simulate(&isolated).totals(provider).arrived
        );
    }
}
