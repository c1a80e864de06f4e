//! The ports part of the quick run: the TIME_WAIT a client per request
//! leaves, the ceiling it implies, and `EADDRNOTAVAIL` from a narrow window.

use lab_conn_reuse::ports::{REFUSED_SERIES, TIME_WAIT_SERIES};
use lab_kit::ports::ephemeral_range;
use lab_kit::{
    Output,
    record::{Point, Value},
};

use super::count;

fn number(point: &Point, field: &str) -> f64 {
    point
        .number(field)
        .unwrap_or_else(|error| panic!("{error:#}"))
}

pub fn time_wait_and_the_ceiling(out: &Output, requests: u64) {
    let point = out
        .summary(TIME_WAIT_SERIES)
        .unwrap_or_else(|| panic!("no summary for {TIME_WAIT_SERIES}"));
    assert_eq!(count(point, "connections"), requests);
    // The client closed every connection first, so it holds the TIME_WAITs.
    assert!(count(point, "time_wait") >= requests * 9 / 10, "{point:?}");
    // Each has about a minute to live, read from its own timer.
    let left = number(point, "time_wait_left_s");
    assert!((50.0..=60.0).contains(&left), "{point:?}");
    let (low, high) = ephemeral_range().expect("the machine's port range");
    let ports = f64::from(high - low + 1);
    assert_eq!(number(point, "ports_in_range"), ports);
    let ceiling = number(point, "ceiling_per_s");
    assert!((ceiling - ports / left).abs() < 1e-6, "{point:?}");
    // Even on a busy machine a client per request on loopback opens new
    // connections faster than a remote address could sustain.
    assert!(number(point, "connections_per_s") > ceiling, "{point:?}");
    let exhaust = number(point, "seconds_to_exhaust");
    assert!((exhaust - ports / number(point, "connections_per_s")).abs() < 1e-6);
}

pub fn a_narrow_window_runs_out(out: &Output, window: u64) {
    let Some(point) = out.summary(REFUSED_SERIES) else {
        // Only a kernel without IP_LOCAL_PORT_RANGE (before 6.3) skips it.
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let (major, minor) = release
            .trim()
            .split_once('.')
            .map(|(major, rest)| {
                let minor = rest
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .unwrap_or("0");
                (major.parse().unwrap_or(0), minor.parse().unwrap_or(0))
            })
            .unwrap_or((0, 0));
        assert!(
            (major, minor) < (6, 3),
            "kernel {release} skipped the window"
        );
        return;
    };
    assert_eq!(count(point, "ports_in_window"), window);
    assert_eq!(
        count(point, "os_error"),
        libc::EADDRNOTAVAIL as u64,
        "{point:?}"
    );
    // Every port of the window served one request before the refusal (a
    // port another program holds as a listener would leave one fewer).
    let served = count(point, "requests_ok");
    assert!((1..=window).contains(&served), "{point:?}");
    assert!(count(point, "time_wait_held") + 1 >= served, "{point:?}");
    // On loopback the default tcp_tw_reuse = 2 hands a port back once its
    // TIME_WAIT is about a second old: long after the refusal, long before 60 s.
    if count(point, "tcp_tw_reuse") == 2 {
        assert!(
            matches!(point.values.get("reused"), Some(Value::Bool(true))),
            "{point:?}"
        );
        let after = number(point, "reused_after_ms");
        assert!((500.0..3000.0).contains(&after), "{point:?}");
    }
}
