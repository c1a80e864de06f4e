//! The overload widget's wasm exports: thin wrappers over `overload-sim` that
//! take the widget's inputs as plain numbers and hand back one flat
//! `Float64Array`, so the wasm carries no serializer and stays small. The
//! field lists are exported too, so `main.js` finds each number by name.

use overload_sim::{
    breaker::{BreakerConfig, BreakerState},
    sim::{
        ConcurrencyLimit, FailureMode, OverloadBucket, OverloadSimConfig, ProviderTotals,
        simulate as run,
    },
};
use wasm_bindgen::prelude::wasm_bindgen;

/// The header of the array [`simulate`] returns, in this order: how many
/// fields each provider's totals and each bucket have, how many buckets and
/// breaker transitions follow, and the run's time scale.
const HEADER_FIELDS: [&str; 8] = [
    "total_field_count",
    "bucket_field_count",
    "bucket_count",
    "transition_count",
    "bucket_ms",
    "duration_ms",
    "window_start_ms",
    "window_end_ms",
];

/// Each provider's totals, in this order (fast, then flaky), after the header.
const TOTAL_FIELDS: [&str; 10] = [
    "arrived",
    "ok",
    "failed",
    "refused",
    "timed_out",
    "sent",
    "unfinished",
    "peak_in_flight",
    "p50_ms",
    "p99_ms",
];

/// Each bucket's fields, in this order, after the totals.
const BUCKET_FIELDS: [&str; 15] = [
    "breaker",
    "fast_in_flight",
    "flaky_in_flight",
    "waiting",
    "fast_ok",
    "fast_failed",
    "fast_timed_out",
    "fast_sent",
    "flaky_ok",
    "flaky_failed",
    "flaky_refused",
    "flaky_timed_out",
    "flaky_sent",
    "fast_p50_ms",
    "fast_p99_ms",
];

/// The most requests per second the widget simulates, so that a run stays
/// within a frame's budget.
pub const MAX_ARRIVALS_PER_S: f64 = 1000.0;

/// The header's field names, comma separated, in array order.
#[wasm_bindgen]
pub fn header_fields() -> String {
    HEADER_FIELDS.join(",")
}

/// The totals' field names, comma separated, in array order.
#[wasm_bindgen]
pub fn total_fields() -> String {
    TOTAL_FIELDS.join(",")
}

/// The buckets' field names, comma separated, in array order.
#[wasm_bindgen]
pub fn bucket_fields() -> String {
    BUCKET_FIELDS.join(",")
}

/// The failure modes' names, in index order.
#[wasm_bindgen]
pub fn failure_modes() -> String {
    FailureMode::ALL.map(FailureMode::name).join(",")
}

/// The limit modes' names, in index order (see [`limit_of`]).
#[wasm_bindgen]
pub fn limit_modes() -> String {
    [
        ConcurrencyLimit::None,
        ConcurrencyLimit::Shared(1),
        ConcurrencyLimit::PerProvider { fast: 1, flaky: 1 },
    ]
    .map(ConcurrencyLimit::name)
    .join(",")
}

/// The breaker's states' names, in the order the buckets number them.
#[wasm_bindgen]
pub fn breaker_states() -> String {
    [
        BreakerState::Closed,
        BreakerState::Open,
        BreakerState::HalfOpen,
    ]
    .map(BreakerState::name)
    .join(",")
}

fn state_index(state: BreakerState) -> f64 {
    match state {
        BreakerState::Closed => 0.0,
        BreakerState::Open => 1.0,
        BreakerState::HalfOpen => 2.0,
    }
}

/// Limit mode 0 is none, 1 one shared pool of `slots`, 2 `slots` per provider.
fn limit_of(mode: u32, slots: u32) -> ConcurrencyLimit {
    let slots = slots.max(1) as usize;
    match mode {
        1 => ConcurrencyLimit::Shared(slots),
        2 => ConcurrencyLimit::PerProvider {
            fast: slots,
            flaky: slots,
        },
        _ => ConcurrencyLimit::None,
    }
}

fn totals_row(totals: &ProviderTotals) -> [f64; TOTAL_FIELDS.len()] {
    [
        f64::from(totals.arrived),
        f64::from(totals.ok),
        f64::from(totals.failed),
        f64::from(totals.refused),
        f64::from(totals.timed_out),
        f64::from(totals.sent),
        f64::from(totals.unfinished),
        totals.peak_in_flight as f64,
        totals.p50_ms.unwrap_or(f64::NAN),
        totals.p99_ms.unwrap_or(f64::NAN),
    ]
}

fn bucket_row(bucket: &OverloadBucket) -> [f64; BUCKET_FIELDS.len()] {
    let [fast, flaky] = [0, 1];
    [
        state_index(bucket.breaker),
        bucket.in_flight[fast] as f64,
        bucket.in_flight[flaky] as f64,
        bucket.waiting as f64,
        f64::from(bucket.ok[fast]),
        f64::from(bucket.failed[fast]),
        f64::from(bucket.timed_out[fast]),
        f64::from(bucket.sent[fast]),
        f64::from(bucket.ok[flaky]),
        f64::from(bucket.failed[flaky]),
        f64::from(bucket.refused[flaky]),
        f64::from(bucket.timed_out[flaky]),
        f64::from(bucket.sent[flaky]),
        bucket.fast_p50_ms.unwrap_or(f64::NAN),
        bucket.fast_p99_ms.unwrap_or(f64::NAN),
    ]
}

/// One run of a minute, from [`OverloadSimConfig::default`] with the reader's
/// inputs: both providers get `workers` and `service_ms`; the breaker, if
/// on, gets `breaker_window` outcomes (a verdict from half of them on),
/// its failure rate, `open_ms` and `probes`. Returns the header
/// ([`header_fields`]), the fast
/// and the flaky provider's totals, the buckets, and the breaker's
/// transitions as `[at_ms, state]` pairs; missing percentiles are NaN.
#[wasm_bindgen]
#[allow(clippy::too_many_arguments)] // one per control of the widget
pub fn simulate(
    seed: u32,
    arrivals_per_s: f64,
    failure_mode: u32,
    failure_rate: f64,
    workers: u32,
    service_ms: f64,
    limit_mode: u32,
    limit: u32,
    timeout_ms: f64,
    breaker_on: bool,
    breaker_window: u32,
    breaker_failure_rate: f64,
    open_ms: f64,
    probes: u32,
) -> Vec<f64> {
    let mut config = OverloadSimConfig {
        seed: u64::from(seed),
        arrivals_per_s: arrivals_per_s.clamp(0.0, MAX_ARRIVALS_PER_S),
        limit: limit_of(limit_mode, limit),
        timeout_ms: timeout_ms.max(1.0),
        ..OverloadSimConfig::default()
    };
    config.failure.mode = FailureMode::ALL
        .get(failure_mode as usize)
        .copied()
        .unwrap_or(FailureMode::Hangs);
    config.failure.rate = failure_rate.clamp(0.0, 1.0);
    for provider in [&mut config.fast, &mut config.flaky] {
        provider.workers = workers.max(1) as usize;
        provider.service_ms = service_ms.max(0.1);
    }
    if breaker_on {
        let window = breaker_window.max(1) as usize;
        config.breaker = Some(BreakerConfig {
            window,
            min_calls: window.div_ceil(2),
            failure_rate: breaker_failure_rate.clamp(0.01, 1.0),
            open_ms: open_ms.max(1.0) as u64,
            half_open_probes: probes.max(1) as usize,
        });
    }
    let result = run(&config);
    let mut flat = Vec::with_capacity(
        HEADER_FIELDS.len()
            + 2 * TOTAL_FIELDS.len()
            + result.buckets.len() * BUCKET_FIELDS.len()
            + 2 * result.transitions.len(),
    );
    let header: [f64; HEADER_FIELDS.len()] = [
        TOTAL_FIELDS.len() as f64,
        BUCKET_FIELDS.len() as f64,
        result.buckets.len() as f64,
        result.transitions.len() as f64,
        config.bucket_ms,
        config.duration_ms,
        config.failure.start_ms,
        config.failure.end_ms,
    ];
    flat.extend(header);
    for totals in &result.totals {
        flat.extend(totals_row(totals));
    }
    for bucket in &result.buckets {
        flat.extend(bucket_row(bucket));
    }
    for &(at_ms, state) in &result.transitions {
        flat.extend([at_ms as f64, state_index(state)]);
    }
    flat
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(names: &str, name: &str) -> usize {
        names
            .split(',')
            .position(|each| each == name)
            .expect("a field")
    }

    fn widget_default(limit_mode: u32, breaker_on: bool) -> Vec<f64> {
        simulate(
            1, 200.0, 1, 0.5, 16, 20.0, limit_mode, 20, 1000.0, breaker_on, 20, 0.5, 5000.0, 5,
        )
    }

    #[test]
    fn the_flat_layout_holds_the_totals_the_buckets_and_the_transitions() {
        let flat = widget_default(1, true);
        let header = |name| flat[field(&header_fields(), name)] as usize;
        let totals = header("total_field_count");
        let fields = header("bucket_field_count");
        let buckets = header("bucket_count");
        let transitions = header("transition_count");
        let header_len = header_fields().split(',').count();
        assert_eq!(totals, total_fields().split(',').count());
        assert_eq!(fields, bucket_fields().split(',').count());
        assert_eq!(buckets, 240);
        assert!(transitions > 0, "the breaker changed state");
        assert_eq!(
            flat.len(),
            header_len + 2 * totals + buckets * fields + 2 * transitions
        );
        // The flaky provider's calls that reached it, from the totals and
        // summed over the buckets, agree.
        let sent = flat[header_len + totals + field(&total_fields(), "sent")];
        let bucket_sent: f64 = (0..buckets)
            .map(|index| {
                flat[header_len
                    + 2 * totals
                    + index * fields
                    + field(&bucket_fields(), "flaky_sent")]
            })
            .sum();
        assert_eq!(sent, bucket_sent);
        assert_eq!(failure_modes(), "fails,hangs");
        assert_eq!(limit_modes(), "none,shared,per-provider");
        assert_eq!(breaker_states(), "closed,open,half-open");
    }

    #[test]
    fn the_bulkhead_shows_through_the_exports() {
        let p99 = header_fields().split(',').count() + field(&total_fields(), "p99_ms");
        let shared = widget_default(1, false)[p99];
        let isolated = widget_default(2, false)[p99];
        assert!(shared > 5.0 * isolated, "{shared} vs {isolated}");
    }
}
