//! Percentiles and a latency recorder: the few statistics the labs report.

use std::time::Duration;

use serde::Serialize;

/// The nearest-rank percentile (0 to 100) of already sorted values; NaN for none.
pub fn percentile(sorted: &[f64], percent: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (percent / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Latencies in milliseconds, summarised once all are in.
#[derive(Debug, Default, Clone)]
pub struct Latencies {
    millis: Vec<f64>,
}

/// What the charts and tables show of a latency distribution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    pub count: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

impl Latencies {
    pub fn record(&mut self, elapsed: Duration) {
        self.millis.push(elapsed.as_secs_f64() * 1000.0);
    }

    pub fn extend(&mut self, other: Latencies) {
        self.millis.extend(other.millis);
    }

    pub fn len(&self) -> usize {
        self.millis.len()
    }

    pub fn is_empty(&self) -> bool {
        self.millis.is_empty()
    }

    /// Zeros for an empty set, so a summary never carries NaN into a record.
    pub fn summary(&self) -> LatencySummary {
        if self.millis.is_empty() {
            return LatencySummary {
                count: 0,
                p50_ms: 0.0,
                p99_ms: 0.0,
                max_ms: 0.0,
                mean_ms: 0.0,
            };
        }
        let mut sorted = self.millis.clone();
        sorted.sort_by(f64::total_cmp);
        LatencySummary {
            count: sorted.len(),
            p50_ms: percentile(&sorted, 50.0),
            p99_ms: percentile(&sorted, 99.0),
            max_ms: sorted[sorted.len() - 1],
            mean_ms: sorted.iter().sum::<f64>() / sorted.len() as f64,
        }
    }
}

/// The median of unsorted values (for repeated runs); NaN for none.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    percentile(&sorted, 50.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), 50.0);
        assert_eq!(percentile(&values, 99.0), 99.0);
        assert_eq!(percentile(&values, 100.0), 100.0);
        assert_eq!(percentile(&values, 0.0), 1.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        assert!(percentile(&[], 50.0).is_nan());
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }

    #[test]
    fn summary_of_nothing_is_zero_not_nan() {
        let summary = Latencies::default().summary();
        assert_eq!(summary.count, 0);
        assert_eq!(summary.p99_ms, 0.0);
    }
}
