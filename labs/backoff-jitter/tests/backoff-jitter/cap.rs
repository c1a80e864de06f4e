//! A long outage: without jitter the callers still arrive together once the
//! sleeps reach the cap, and a fixed delay makes them arrive together from
//! the first retry; full jitter spreads them. Margins: a busy machine
//! spreads the herd's arrivals (in a fresh-clone CI run, beside the other
//! tests of the batch, 76 of the 100 callers without jitter arrived within
//! 100 ms, where a quiet run sees all 100), so the herd's peak is asked to be
//! half the callers and half again full jitter's peak, and full jitter's at
//! most 60 % (37 to 40 in every run seen, quiet or busy).

use lab_backoff_jitter::{Config, cap};
use lab_kit::{Lab, Mode, Output};

use crate::number;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_jitter_the_herd_arrives_together_at_the_cap() {
    let config = Config::for_mode(Mode::Quick);
    let mut out = Output::collect();
    cap::run(&config, &mut out)
        .await
        .expect("the long outage runs");
    let callers = config.live_clients as f64;
    let peak = |series: &str| number(&out, series, "peak_100ms_at_cap");
    let peaks = ["cap/no-jitter", "cap/fixed-delay", "cap/full-jitter"].map(peak);
    eprintln!("peaks in 100 ms at the cap (no jitter, fixed, full jitter): {peaks:?}");
    for herd in [peaks[0], peaks[1]] {
        assert!(herd >= 0.5 * callers, "{peaks:?} of {callers}");
        assert!(herd >= 1.5 * peaks[2], "{peaks:?} of {callers}");
    }
    assert!(peaks[2] <= 0.6 * callers, "{peaks:?} of {callers}");
    // Every caller of the deterministic sequences outlasts the outage.
    assert_eq!(number(&out, "cap/no-jitter", "succeeded"), callers);
    assert_eq!(number(&out, "cap/fixed-delay", "succeeded"), callers);
    assert!(number(&out, "cap/fixed-delay", "calls") < number(&out, "cap/no-jitter", "calls"));
}
