//! Part 7 in quick mode: an upstream that dies, taken out by the reactive
//! breaker, by an active health probe, or by both. The reactive breaker needs
//! ten failed calls (eight or so from a window of few calls), the probe two
//! intervals: at two users a second about four seconds against one, at fifty
//! a fifth of a second against one. The margins are factors of two or one and a
//! half on that arithmetic, or a few calls.

use lab_kit::{Lab, Mode, concurrently::result_of};
use lab_overload::{
    Config,
    health_probe::{ProbeCase, ProbeOutcome, run_probes},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_wins_when_calls_are_few_and_the_reactive_breaker_when_they_are_many() {
    let config = Config::for_mode(Mode::Quick);
    let outcomes = run_probes(&config).await.expect("the cases run");
    let label = format!("{outcomes:#?}");
    let of = |case: ProbeCase| -> ProbeOutcome {
        result_of(&outcomes, &case)
            .expect("every case reports")
            .clone()
    };
    for (case, outcome) in &outcomes {
        assert!(
            outcome.opened,
            "{case:?} took the dead upstream out: {label}"
        );
        assert!(
            outcome.wasted >= 1,
            "{case:?} sent a call to the dead upstream: {label}"
        );
    }
    let (reactive, probe, both) = (
        of(ProbeCase::ReactiveQuiet),
        of(ProbeCase::ProbeQuiet),
        of(ProbeCase::BothQuiet),
    );
    // Quiet: the breaker waits for enough failed calls, the probe does not.
    assert!(
        reactive.time_to_open_ms >= 2.0 * probe.time_to_open_ms,
        "{label}"
    );
    assert!(
        reactive.wasted_before_open >= probe.wasted_before_open + 3,
        "{label}"
    );
    assert!(
        both.time_to_open_ms <= probe.time_to_open_ms + 200.0,
        "{label}"
    );
    let (reactive, probe, both) = (
        of(ProbeCase::ReactiveBusy),
        of(ProbeCase::ProbeBusy),
        of(ProbeCase::BothBusy),
    );
    // Busy: ten failed calls come sooner than two probe intervals.
    assert!(
        probe.time_to_open_ms >= 1.5 * reactive.time_to_open_ms,
        "{label}"
    );
    assert!(
        2 * probe.wasted_before_open >= 3 * reactive.wasted_before_open,
        "{label}"
    );
    assert!(
        both.wasted_before_open <= reactive.wasted_before_open + 5,
        "{label}"
    );
    // Once out, the probe sends no user to the dead upstream; the reactive
    // breaker lets a user through at every half-open.
    assert_eq!(probe.wasted, probe.wasted_before_open, "{label}");
    assert!(reactive.wasted > reactive.wasted_before_open, "{label}");
    // The probe's price while all is well: its requests, whatever the traffic.
    assert_eq!(reactive.probe_requests, 0, "{label}");
    assert!(probe.probe_requests >= 4, "{label}");
}
