//! A long outage: without jitter the callers still arrive together once the
//! sleeps reach the cap, and a fixed delay makes them arrive together from
//! the first retry; full jitter spreads them. Margins: a busy machine
//! spreads arrivals a little (never gathers them), so the herd's bound is
//! 80 % of the callers in 100 ms and full jitter's 60 %.

use lab_backoff_jitter::{BackoffConfig, cap};
use lab_kit::{Mode, Output};

use crate::number;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_jitter_the_herd_arrives_together_at_the_cap() {
    let config = BackoffConfig::for_mode(Mode::Quick);
    let mut out = Output::collect();
    cap::run(&config, &mut out)
        .await
        .expect("the long outage runs");
    let callers = config.live_clients as f64;
    let peak = |series: &str| number(&out, series, "peak_100ms_at_cap");
    let peaks = ["cap/no-jitter", "cap/fixed-delay", "cap/full-jitter"].map(peak);
    eprintln!("peaks in 100 ms at the cap (no jitter, fixed, full jitter): {peaks:?}");
    assert!(peaks[0] >= 0.8 * callers, "{peaks:?} of {callers}");
    assert!(peaks[1] >= 0.8 * callers, "{peaks:?} of {callers}");
    assert!(peaks[2] <= 0.6 * callers, "{peaks:?} of {callers}");
    // Every caller of the deterministic sequences outlasts the outage.
    assert_eq!(number(&out, "cap/no-jitter", "succeeded"), callers);
    assert_eq!(number(&out, "cap/fixed-delay", "succeeded"), callers);
    assert!(number(&out, "cap/fixed-delay", "calls") < number(&out, "cap/no-jitter", "calls"));
}
