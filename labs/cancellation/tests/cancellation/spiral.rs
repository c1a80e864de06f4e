//! The spiral in quick mode: with a query timeout longer than the route's,
//! queries run for users who have left and goodput collapses; with the
//! request's cancellation propagated into the query, goodput is clearly
//! higher, and a query runs for nobody only for the moment it takes a
//! user's close to reach SQLite.

use lab_cancellation::{
    Config,
    db::SlowDatabase,
    spiral::{SpiralVariant, spiral_variant},
};
use lab_kit::{Lab, Mode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn propagated_cancellation_beats_a_long_query_timeout() {
    let config = Config::for_mode(Mode::Quick);
    let speed = SlowDatabase::open(1)
        .expect("the query is timed")
        .rows_per_ms;
    let (long_samples, long) = spiral_variant(SpiralVariant::LongQueryTimeout, &config, speed)
        .await
        .expect("the long-timeout spiral runs");
    let (fixed_samples, fixed) = spiral_variant(SpiralVariant::Propagated, &config, speed)
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
    // A query whose user has left runs on until the close has travelled
    // from the socket (hyper reads the end, drops the handler, the token is
    // cancelled) to SQLite's next progress check. On a loaded 2-core machine
    // that lag can reach a sampling interval, longer than the gap between two
    // users leaving (one run in twenty showed two such queries in a sample,
    // in a run whose goodput was half the usual): so the bound is the users
    // who can leave within one interval.
    let leave_in_one_interval = (config.sample_every_s * config.arrivals_per_s).ceil() as u64;
    for sample in &fixed_samples {
        assert!(
            sample.for_nobody <= leave_in_one_interval,
            "{sample:?}\n{label}"
        );
        // Never more queries than users waiting, but for those.
        assert!(
            sample.running <= sample.waiting + leave_in_one_interval,
            "{sample:?}\n{label}"
        );
        assert!(
            sample.running <= config.pool_size as u64 + sample.waiting,
            "{sample:?}"
        );
    }
}
