//! The backoff-jitter lab's tests, one binary: each module was a test file of its
//! own, and each test binary links the whole HTTP stack, so one binary per
//! crate keeps `cargo xtask test` from spending its time linking.

mod cap;
mod deadline;
mod errors;
mod policy;
mod quick;

/// A summary's number, or a panic naming what is missing.
fn number(out: &lab_kit::Output, series: &str, field: &str) -> f64 {
    out.summary(series)
        .unwrap_or_else(|| panic!("no summary for {series}"))
        .number(field)
        .unwrap_or_else(|error| panic!("{error:#}"))
}
