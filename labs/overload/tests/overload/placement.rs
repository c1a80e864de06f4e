//! Part 4 in quick mode: where the breaker sits, against a hang and against
//! blips. The margins are wide: a run on a busy 2-core machine delays the
//! retries, which moves them out of a blip and makes the outside breaker
//! safer still; the inside breaker needs only ten failed attempts in one
//! blip, where each blip brings about twenty.

use lab_kit::{Lab, Mode, concurrently::result_of};
use lab_overload::{
    Config,
    placement::{PlacementCase, run_placements},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn around_each_attempt_blips_open_the_breaker_and_outside_the_retries_they_do_not() {
    let config = Config::for_mode(Mode::Quick);
    let outcomes = run_placements(&config).await.expect("the cases run");
    let label = format!("{outcomes:#?}");
    let of = |case: PlacementCase| {
        result_of(&outcomes, &case)
            .expect("every case reports")
            .clone()
    };
    let (none, outside, inside) = (
        of(PlacementCase::BlipsNoBreaker),
        of(PlacementCase::BlipsOutside),
        of(PlacementCase::BlipsInside),
    );
    assert!(none.spells >= 4, "{label}");
    // The retries absorb most of each blip: few users see an error.
    assert!(none.user_errors * 10 <= none.users, "{label}");
    // One breaker call per user request: the blips never reach its threshold.
    assert_eq!(outside.false_opens, 0, "{label}");
    assert!(outside.user_errors * 10 <= outside.users, "{label}");
    // Around each attempt: every failed attempt counts, so blips open it,
    // and its refusals turn absorbed blips into errors.
    assert!(inside.false_opens >= 2, "{label}");
    assert!(
        inside.user_errors >= 3 * outside.user_errors + 20,
        "{label}"
    );
    assert!(inside.recovered_after_ms > 0.0, "{label}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_the_retries_the_breaker_still_spares_a_hung_provider() {
    let config = Config::for_mode(Mode::Quick);
    let outcomes = run_placements(&config).await.expect("the cases run");
    let label = format!("{outcomes:#?}");
    let of = |case: PlacementCase| {
        result_of(&outcomes, &case)
            .expect("every case reports")
            .clone()
    };
    let (none, outside, inside) = (
        of(PlacementCase::HangNoBreaker),
        of(PlacementCase::HangOutside),
        of(PlacementCase::HangInside),
    );
    assert_eq!(none.refused, 0, "{label}");
    for with_breaker in [&outside, &inside] {
        assert!(with_breaker.opens >= 1, "{label}");
        assert_eq!(with_breaker.false_opens, 0, "{label}");
        assert!(
            (with_breaker.reached_while_failing as f64) <= 0.75 * none.reached_while_failing as f64,
            "{label}"
        );
    }
    // Around each attempt it opens sooner: the side of the trade part 3 measured.
    assert!(
        inside.reached_while_failing <= outside.reached_while_failing,
        "{label}"
    );
}
