//! Part 6 in quick mode: the enrichment batch through the outbound guard
//! with nothing on, each piece alone, and whole. The margins are wide: a busy
//! machine delays the retries and the bucket's refills, which moves counts
//! by a few items, never by tens.

use lab_kit::{Lab, Mode, concurrently::result_of};
use lab_overload::{
    Config,
    enrichment::{Enrichment, EnrichmentOutcome, run_enrichment},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_piece_fixes_one_thing_and_the_whole_guard_all_of_them() {
    let _apart = crate::APART.lock().await;
    let config = Config::for_mode(Mode::Quick);
    let outcomes = run_enrichment(&config).await.expect("the setups run");
    let label = format!("{outcomes:#?}");
    let of = |setup: Enrichment| -> EnrichmentOutcome {
        result_of(&outcomes, &setup)
            .expect("every setup reports")
            .clone()
    };
    let items = config.enrich_items as u64;
    let slots = config.enrich_slots as u64;
    let hang_ms = config.enrich_hang_ms;
    let none = of(Enrichment::Unguarded);
    let timeout = of(Enrichment::TimeoutAlone);
    let retries = of(Enrichment::RetriesAlone);
    let bulkhead = of(Enrichment::BulkheadAlone);
    let breaker = of(Enrichment::BreakerAlone);
    let guard = of(Enrichment::WholeGuard);
    for outcome in [&none, &timeout, &retries, &bulkhead, &breaker, &guard] {
        assert_eq!(outcome.items, 2 * items, "{label}");
        assert_eq!(
            outcome.hung_failed, items,
            "nothing enriches a hung item: {label}"
        );
    }
    // Nothing on: the whole batch lands on both providers at once; the
    // bucket's burst passes and the rest is refused; every hung item waits
    // for the hang.
    assert!(none.hung_peak >= items * 9 / 10, "{label}");
    assert!(none.limited_429s >= items / 2, "{label}");
    assert!(none.hung_p50_ms >= 0.9 * hang_ms, "{label}");
    // A breaker alone sees no failure before the hang ends: every item is
    // already out by then.
    assert!(breaker.hung_peak >= items * 9 / 10, "{label}");
    assert!(breaker.hung_p50_ms >= 0.9 * hang_ms, "{label}");
    // A timeout alone ends the hung items early. (How many of them reached
    // the provider first depends on how fast a busy machine accepts two
    // hundred connections at once, so no count is asserted.)
    assert!(timeout.hung_p50_ms <= hang_ms / 2.0, "{label}");
    // A bulkhead alone bounds what each provider holds.
    assert!(
        bulkhead.hung_peak <= slots && bulkhead.limited_peak <= slots,
        "{label}"
    );
    // The whole guard: bounded at both providers, the hung one spared, and more of the limited provider's items
    // enriched, with fewer 429s, than with nothing on.
    assert!(
        guard.hung_peak <= slots && guard.limited_peak <= slots,
        "{label}"
    );
    assert!(guard.hung_requests * 2 <= none.hung_requests, "{label}");
    assert!(guard.limited_ok >= none.limited_ok + 20, "{label}");
    assert!(guard.limited_429s * 2 <= none.limited_429s, "{label}");
    assert!(guard.refused_by_breaker >= items / 2, "{label}");
}
