//! The `grpc-timeout` header, the format the lab's services use to pass a
//! request's remaining budget on: up to 8 ASCII digits and a unit, `H` hours,
//! `M` minutes, `S` seconds, `m` milliseconds, `u` microseconds, `n`
//! nanoseconds (gRPC over HTTP/2, "Requests"). A relative budget rather than
//! an absolute deadline (`x-request-deadline: <epoch ms>`): each hop adds it
//! to its own clock on arrival, so no two hosts need synchronised clocks; the
//! time the request spent on the wire is not counted, which is what each
//! hop's margin is for.

use std::time::Duration;

// ANCHOR: header
/// The header's name.
pub const HEADER: &str = "grpc-timeout";

/// Parses a `grpc-timeout` value; `None` for anything malformed (a hop then
/// falls back to its own timeout rather than trusting a garbled budget).
pub fn parse(value: &str) -> Option<Duration> {
    let digits_end = value.len().checked_sub(1)?;
    let (digits, unit) = value.split_at(digits_end);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount * 3600),
        "M" => Duration::from_secs(amount * 60),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

/// Encodes a budget in the finest unit that fits in 8 digits, rounded down,
/// so a hop never hands on more time than it has.
pub fn encode(budget: Duration) -> String {
    let nanos = budget.as_nanos();
    for (unit, per) in [
        ("n", 1),
        ("u", 1_000),
        ("m", 1_000_000),
        ("S", 1_000_000_000),
    ] {
        let amount = nanos / per;
        if amount < 100_000_000 {
            return format!("{amount}{unit}");
        }
    }
    format!("{}M", (budget.as_secs() / 60).min(99_999_999))
}
// ANCHOR_END: header
