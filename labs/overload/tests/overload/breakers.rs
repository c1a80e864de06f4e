//! Part 3 in quick mode, and what the chapter says of the two breaker crates.

use std::time::Duration;

use failsafe::{backoff, failure_policy};
use lab_kit::{Lab, Mode, concurrently::result_of};
use lab_overload::{
    Config,
    breakers::{BreakerSetup, run_breakers},
};
use overload_sim::breaker::{Breaker, BreakerConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_breaker_spares_the_hung_provider_and_most_so_inside_the_retries() {
    let config = Config::for_mode(Mode::Quick);
    let outcomes = run_breakers(&config).await.expect("the setups run");
    let label = format!("{outcomes:#?}");
    let of = |setup: BreakerSetup| {
        result_of(&outcomes, &setup)
            .expect("every setup reports")
            .clone()
    };
    let none = of(BreakerSetup::NoBreaker);
    assert_eq!(none.refused, 0, "{label}");
    let pairs = [
        (BreakerSetup::OwnOutside, BreakerSetup::OwnInside),
        (BreakerSetup::FailsafeOutside, BreakerSetup::FailsafeInside),
        (BreakerSetup::TowerOutside, BreakerSetup::TowerInside),
    ];
    for (outside, inside) in pairs {
        let (outside, inside) = (of(outside), of(inside));
        for setup in [&outside, &inside] {
            assert!(setup.refused > 0, "{label}");
            assert!(
                (setup.reached_while_failing as f64) <= 0.9 * none.reached_while_failing as f64,
                "{label}"
            );
        }
        // Every attempt counts inside the retries, so the breaker opens sooner.
        assert!(
            (inside.reached_while_failing as f64) <= 0.7 * outside.reached_while_failing as f64,
            "{label}"
        );
    }
}

#[test]
fn failsafe_half_open_lets_every_call_through_and_the_labs_breaker_bounds_its_probes() {
    let open_for = Duration::from_millis(30);
    let failsafe = failsafe::Config::new()
        .failure_policy(failure_policy::consecutive_failures(
            1,
            backoff::constant(open_for),
        ))
        .build();
    failsafe.on_error();
    assert!(!failsafe.is_call_permitted(), "open after one failure");
    std::thread::sleep(open_for * 2);
    // Half-open: no limit on how many calls go through as probes.
    assert!((0..100).all(|_| failsafe.is_call_permitted()));

    let mut own = Breaker::new(BreakerConfig {
        window: 1,
        min_calls: 1,
        failure_rate: 1.0,
        open_ms: 30,
        half_open_probes: 1,
    });
    let permit = own.try_acquire(0).expect("closed");
    own.record(permit, 0, false);
    assert!(own.try_acquire(60).is_some(), "one probe");
    assert!(own.try_acquire(60).is_none(), "and no more");
}
