//! The backoff widget's wasm exports: thin wrappers over `backoff-sim` that
//! pass flat numbers across the boundary (a `Float64Array` in JS), so the wasm
//! carries no serializer and stays small.

use backoff_sim::{SimConfig, Strategy, simulate as run};
use wasm_bindgen::prelude::wasm_bindgen;

/// Where each total sits in the array [`simulate`] returns; the histogram
/// follows from `HEADER_LEN` on.
pub const CALLS: usize = 0;
pub const FAILURES: usize = 1;
pub const COMPLETION_MS: usize = 2;
pub const SPAN_MS: usize = 3;
pub const TRUNCATED: usize = 4;
pub const HEADER_LEN: usize = 5;

/// The most clients the widget simulates; beyond this "none" gets slow.
pub const MAX_CLIENTS: u32 = 1000;

fn config(clients: u32, base_ms: f64, cap_ms: f64, strategy: Strategy, seed: u32) -> SimConfig {
    let mut config = SimConfig::published(clients.clamp(1, MAX_CLIENTS), strategy, u64::from(seed));
    config.base_ms = base_ms.max(0.0);
    config.cap_ms = cap_ms.max(config.base_ms);
    // A bound the browser can afford even for a pathological input.
    config.max_calls = 2_000_000;
    config
}

/// The strategies' names, comma separated, in index order.
#[wasm_bindgen]
pub fn strategy_names() -> String {
    Strategy::ALL
        .iter()
        .map(|strategy| strategy.name())
        .collect::<Vec<_>>()
        .join(",")
}

/// One run: `[calls, failures, completion_ms, span_ms, truncated, bucket...]`
/// with `buckets` equal buckets of calls over `0..span_ms`. `span_ms` is the
/// given one if positive, else the run's own completion time.
#[wasm_bindgen]
pub fn simulate(
    clients: u32,
    base_ms: f64,
    cap_ms: f64,
    strategy: u32,
    seed: u32,
    buckets: u32,
    span_ms: f64,
) -> Vec<f64> {
    let strategy = Strategy::from_index(strategy).unwrap_or(Strategy::FullJitter);
    let result = run(&config(clients, base_ms, cap_ms, strategy, seed));
    let span = if span_ms > 0.0 {
        span_ms
    } else {
        result.completion_ms.max(1.0)
    };
    let mut flat = Vec::with_capacity(HEADER_LEN + buckets as usize);
    flat.push(result.calls as f64);
    flat.push(result.failures as f64);
    flat.push(result.completion_ms);
    flat.push(span);
    flat.push(if result.truncated { 1.0 } else { 0.0 });
    flat.extend(
        result
            .histogram(span, buckets as usize)
            .into_iter()
            .map(f64::from),
    );
    flat
}

/// Every strategy on the same inputs: `[calls, completion_ms]` per strategy,
/// in index order, for the totals table.
#[wasm_bindgen]
pub fn compare(clients: u32, base_ms: f64, cap_ms: f64, seed: u32) -> Vec<f64> {
    Strategy::ALL
        .iter()
        .flat_map(|&strategy| {
            let result = run(&config(clients, base_ms, cap_ms, strategy, seed));
            [result.calls as f64, result.completion_ms]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flat_layout_holds_the_totals_and_every_call() {
        let flat = simulate(100, 5.0, 2000.0, 3, 11, 80, 0.0);
        assert_eq!(flat.len(), HEADER_LEN + 80);
        let bucketed: f64 = flat[HEADER_LEN..].iter().sum();
        assert_eq!(bucketed, flat[CALLS]);
        assert_eq!(flat[TRUNCATED], 0.0);
        assert_eq!(flat[SPAN_MS], flat[COMPLETION_MS]);
        let names: Vec<String> = strategy_names().split(',').map(String::from).collect();
        assert_eq!(names[3], "full-jitter");
        let table = compare(100, 5.0, 2000.0, 11);
        assert_eq!(table.len(), 10);
        assert_eq!(
            table[6], flat[CALLS],
            "compare and simulate agree for full jitter"
        );
    }
}
