//! The TLS part of the quick run: who paid for a handshake, and what it cost.

use lab_kit::{Output, record::Point};

use super::count;

fn summary(out: &Output, series: &str) -> Point {
    out.summary(series)
        .unwrap_or_else(|| panic!("no summary for {series}"))
        .clone()
}

fn number(point: &Point, field: &str) -> f64 {
    point
        .number(field)
        .unwrap_or_else(|error| panic!("{error:#}"))
}

/// Every new connection paid a handshake; only a shared TLS configuration
/// resumed; one kept connection paid once. The CPU and the median latency
/// follow the handshakes, with margins far inside the ratios measured (about
/// twenty to one for CPU), so a busy machine does not flip them.
pub fn handshakes_follow_the_connections(out: &Output, requests: u64) {
    let per_request = summary(out, "tls/client-per-request");
    let resumed = summary(out, "tls/resumed-session");
    let shared = summary(out, "tls/shared-connection");

    assert_eq!(count(&per_request, "connections"), requests);
    assert_eq!(count(&per_request, "full_handshakes"), requests);
    assert_eq!(count(&per_request, "resumed_handshakes"), 0);

    // The first handshake of a shared configuration is a full one; every
    // later connection finds a session ticket and resumes.
    assert_eq!(count(&resumed, "connections"), requests);
    assert_eq!(count(&resumed, "full_handshakes"), 1, "{resumed:?}");
    assert_eq!(count(&resumed, "resumed_handshakes"), requests - 1);

    assert_eq!(count(&shared, "connections"), 1);
    assert_eq!(count(&shared, "full_handshakes"), 1);

    for new_connections in [&per_request, &resumed] {
        assert!(
            number(new_connections, "cpu_us") > 3.0 * number(&shared, "cpu_us"),
            "{new_connections:?} against {shared:?}"
        );
        assert!(
            number(new_connections, "server_cpu_us") > 3.0 * number(&shared, "server_cpu_us"),
            "the server pays too: {new_connections:?} against {shared:?}"
        );
        assert!(
            number(new_connections, "p50_ms") > 2.0 * number(&shared, "p50_ms"),
            "{new_connections:?} against {shared:?}"
        );
    }
    // Both ends are counted: the sum is the sum.
    for point in [&per_request, &resumed, &shared] {
        let sum = number(point, "client_cpu_us") + number(point, "server_cpu_us");
        assert!((number(point, "cpu_us") - sum).abs() < 1e-6, "{point:?}");
    }
}
