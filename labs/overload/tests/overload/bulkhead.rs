//! Part 1 in quick mode: with a slot pool per provider the fast provider's
//! users do not notice the flaky one hanging; with one shared pool they wait
//! behind its hung calls.

use lab_kit::{Lab, Mode, concurrently::result_of};
use lab_overload::Config;
use lab_overload::bulkhead::{Bulkhead, run_bulkheads};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_provider_slots_keep_the_fast_provider_flat_and_a_shared_pool_does_not() {
    let config = Config::for_mode(Mode::Quick);
    let outcomes = run_bulkheads(&config).await.expect("the setups run");
    let of = |setup: Bulkhead| {
        result_of(&outcomes, &setup)
            .expect("every setup reports")
            .clone()
    };
    let label = format!("{outcomes:#?}");
    let healthy = of(Bulkhead::Healthy);
    let shared = of(Bulkhead::Shared);
    let limit = config.bulkhead_per_provider as u64;
    for setup in [Bulkhead::PerProvider, Bulkhead::PerProviderTower] {
        let outcome = of(setup);
        // Within a small factor of the unloaded p99 (about 60 ms here).
        assert!(
            outcome.fast_p99_ms <= 3.0 * healthy.fast_p99_ms,
            "{setup:?}: {label}"
        );
        assert_eq!(outcome.fast_failed, 0, "{setup:?}: {label}");
        // The slot goes back when the call times out; the provider's handler
        // goes a moment later, when hyper reads the close: at most one extra
        // per slot on a busy machine.
        assert!(
            outcome.flaky_peak_at_provider <= 2 * limit,
            "{setup:?}: {label}"
        );
    }
    // Behind one pool the fast users wait for slots the hung calls hold.
    assert!(shared.fast_p99_ms >= 5.0 * healthy.fast_p99_ms, "{label}");
    assert!(shared.peak_waiting_for_a_slot > 0, "{label}");
    // No bound: the fast users are fine in Rust (a task per call is cheap),
    // but the flaky provider holds every hung call at once.
    let unbounded = of(Bulkhead::NoLimit);
    assert!(
        unbounded.fast_p99_ms <= 3.0 * healthy.fast_p99_ms,
        "{label}"
    );
    assert!(unbounded.flaky_peak_at_provider >= 3 * limit, "{label}");
}
