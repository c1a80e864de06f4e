//! The spiral in quick mode: with a query timeout longer than the route's,
//! queries run for users who have left and goodput collapses; with the
//! request's cancellation propagated into the query, goodput is clearly
//! higher and no sample shows more than one query running for nobody (one:
//! the moment between a user leaving and SQLite's next progress check).

use lab_cancellation::{
    CancellationConfig,
    spiral::{SpiralVariant, spiral_variant},
};
use lab_kit::Mode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn propagated_cancellation_beats_a_long_query_timeout() {
    let config = CancellationConfig::for_mode(Mode::Quick);
    let (long_samples, long) = spiral_variant(SpiralVariant::LongQueryTimeout, &config)
        .await
        .expect("the long-timeout spiral runs");
    let (fixed_samples, fixed) = spiral_variant(SpiralVariant::Propagated, &config)
        .await
        .expect("the propagated spiral runs");
    let label = format!("{long:?}\n{fixed:?}");
    assert!(fixed.goodput_pct > long.goodput_pct + 15.0, "{label}");
    assert!(long.max_for_nobody >= 2, "{label}");
    assert!(
        long.query_s_for_nobody > fixed.query_s_for_nobody * 3.0 + 20.0,
        "{label}"
    );
    for sample in long_samples.iter().chain(&fixed_samples) {
        assert!(sample.running <= config.pool_size as u64, "{sample:?}");
    }
    for sample in &fixed_samples {
        assert!(sample.for_nobody <= 1, "{sample:?}\n{label}");
        assert!(sample.running <= sample.waiting + 1, "{sample:?}\n{label}");
    }
}
