//! The backoff widget's wasm exports: thin wrappers over `backoff-sim` that
//! pass flat numbers across the boundary (a `Float64Array` in JS), so the wasm
//! carries no serializer and stays small.

use backoff_sim::{SimConfig, Strategy, simulate as run};
use wasm_bindgen::prelude::wasm_bindgen;

/// The totals at the head of the array [`simulate`] returns, in this order;
/// the histogram follows. Exported as [`header_fields`], so `main.js` finds
/// each number by name.
const HEADER_FIELDS: [&str; 5] = ["calls", "failures", "completion_ms", "span_ms", "truncated"];

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

/// The header's field names, comma separated, in array order.
#[wasm_bindgen]
pub fn header_fields() -> String {
    HEADER_FIELDS.join(",")
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

/// One run: the header ([`header_fields`]), then the calls counted in
/// `buckets` equal buckets over `0..span_ms`. `span_ms` is the given one if
/// positive, else the run's own completion time.
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
    let header: [f64; HEADER_FIELDS.len()] = [
        result.calls as f64,
        result.failures as f64,
        result.completion_ms,
        span,
        if result.truncated { 1.0 } else { 0.0 },
    ];
    let mut flat = Vec::with_capacity(header.len() + buckets as usize);
    flat.extend(header);
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

    /// A header field of `flat` by name, as `main.js` finds it.
    fn field(flat: &[f64], name: &str) -> f64 {
        let index = header_fields()
            .split(',')
            .position(|each| each == name)
            .expect("a header field");
        flat[index]
    }

    #[test]
    fn the_flat_layout_holds_the_totals_and_every_call() {
        let flat = simulate(100, 5.0, 2000.0, 3, 11, 80, 0.0);
        let header = header_fields().split(',').count();
        assert_eq!(flat.len(), header + 80);
        let bucketed: f64 = flat[header..].iter().sum();
        assert_eq!(bucketed, field(&flat, "calls"));
        assert_eq!(field(&flat, "truncated"), 0.0);
        assert_eq!(field(&flat, "span_ms"), field(&flat, "completion_ms"));
        let names: Vec<String> = strategy_names().split(',').map(String::from).collect();
        assert_eq!(names[3], "full-jitter");
        let table = compare(100, 5.0, 2000.0, 11);
        // Two numbers per strategy: calls and completion.
        assert_eq!(table.len(), 2 * names.len());
        assert_eq!(names.len(), 6);
        assert_eq!(
            table[6],
            field(&flat, "calls"),
            "compare and simulate agree for full jitter"
        );
    }
}
