//! Wall-clock time as RFC 3339 text, without pulling a date crate into every lab.

use std::time::{SystemTime, UNIX_EPOCH};

/// The current UTC time, to the second, as `2026-11-29T18:09:02Z`.
pub fn now_rfc3339() -> String {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0);
    rfc3339_from_unix(seconds)
}

/// Formats seconds since the Unix epoch as an RFC 3339 UTC timestamp.
pub fn rfc3339_from_unix(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let second_of_day = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        (second_of_day / 60) % 60,
        second_of_day % 60
    )
}

/// A timeout and when a connection closed, as table cells: `"30 s"` and
/// `"30.0 s"`, or `"none"` for no timeout and `"still open at 110 s"` for a
/// connection that outlived the `window_s` it was watched for.
pub fn close_in_words(
    configured_s: Option<f64>,
    closed_s: Option<f64>,
    window_s: f64,
) -> (String, String) {
    let configured = configured_s.map_or_else(|| "none".to_string(), |s| format!("{s:.0} s"));
    let closed_at = closed_s.map_or_else(
        || format!("still open at {window_s:.0} s"),
        |s| format!("{s:.1} s"),
    );
    (configured, closed_at)
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(days_since_epoch: i64) -> (i64, u32, u32) {
    let shifted = days_since_epoch + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339_from_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_from_unix(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_from_unix(1_795_975_742), "2026-11-29T18:09:02Z");
    }

    #[test]
    fn a_missing_timeout_and_a_connection_that_stayed_open_are_said_in_words() {
        assert_eq!(
            close_in_words(None, None, 110.0),
            ("none".to_string(), "still open at 110 s".to_string())
        );
        assert_eq!(
            close_in_words(Some(30.0), Some(30.0494), 110.0),
            ("30 s".to_string(), "30.0 s".to_string())
        );
    }
}
