//! The simulation's randomness beyond `SplitMix64`: exponential gaps for
//! Poisson arrivals, from a logarithm that gives the same bits everywhere.

use seeded_rng::SplitMix64;

/// An exponential gap with the given mean: `-mean * ln(1 - u)`.
pub(super) fn exponential(rng: &mut SplitMix64, mean: f64) -> f64 {
    -mean * portable_ln(1.0 - rng.unit())
}

/// The natural logarithm of a positive normal number, from additions,
/// multiplications and divisions only, which IEEE 754 rounds the same way
/// everywhere; `f64::ln` calls the platform's libm, whose last bit may differ
/// between the native lab and the wasm widget, and one bit is enough for two
/// event queues to part ways.
fn portable_ln(x: f64) -> f64 {
    const MANTISSA: u64 = (1 << 52) - 1;
    let bits = x.to_bits();
    let mut exponent = ((bits >> 52) & 0x7ff) as i64 - 1023;
    // x = m * 2^exponent with m in [1, 2), then in [0.71, 1.42) so that the
    // series below converges in a dozen terms.
    let mut m = f64::from_bits((bits & MANTISSA) | (1023 << 52));
    if m > std::f64::consts::SQRT_2 {
        m /= 2.0;
        exponent += 1;
    }
    // ln m = 2 (s + s^3/3 + s^5/5 + ...) with s = (m - 1) / (m + 1), |s| < 0.18.
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut term = s;
    let mut sum = 0.0;
    for k in 0..14 {
        sum += term / f64::from(2 * k + 1);
        term *= s2;
    }
    2.0 * sum + exponent as f64 * std::f64::consts::LN_2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_portable_logarithm_agrees_with_libm() {
        for x in [1e-15, 1e-6, 0.1, 0.5, 0.7, 0.7072, 0.9, 0.999_999, 1.0, 3.0] {
            let error = (portable_ln(x) - x.ln()).abs();
            assert!(error <= 1e-14 * x.ln().abs().max(1.0), "ln {x}: {error}");
        }
    }

    #[test]
    fn exponential_gaps_have_the_mean_asked_for() {
        let mut rng = SplitMix64::new(9);
        let n = 100_000;
        let mean = (0..n).map(|_| exponential(&mut rng, 5.0)).sum::<f64>() / n as f64;
        assert!((mean - 5.0).abs() < 0.1, "mean {mean}");
    }
}
