//! Part 6 in quick mode: the same requests seen by three access logs. A
//! client abort never reaches `TraceLayer`'s `on_response` (hyper dropped the
//! service future, layers included), a log that calls it a 500 inflates the
//! error rate, and the 499 log has a line for every request with the real
//! errors alone as its 5xx.

use lab_cancellation::{Config, counting::run_counting};
use lab_kit::{Lab, Mode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_abort_is_a_499_not_a_500_and_not_a_missing_line() {
    let config = Config::for_mode(Mode::Quick);
    let counts = run_counting(&config).await.expect("the batch runs");
    let label = format!("{counts:#?}");
    let [trace, as_500, as_499] = counts.as_slice() else {
        panic!("three logs: {label}");
    };
    let aborts = trace.client_aborts;
    let real_errors = trace.server_errors_seen_by_clients;
    // The batch has slow requests whose client leaves, and real failures.
    assert!(
        aborts >= config.count_requests / config.count_slow_every,
        "{label}"
    );
    assert!(real_errors >= 1, "{label}");
    // TraceLayer: a line for every answer, none for an abort.
    assert_eq!(trace.lines, trace.requests_sent - aborts, "{label}");
    assert_eq!(trace.lines_499, 0, "{label}");
    assert_eq!(trace.lines_5xx, real_errors, "{label}");
    // Aborts as 500: the error rate counts the clients that left.
    assert_eq!(as_500.lines, as_500.requests_sent, "{label}");
    assert_eq!(as_500.lines_5xx, real_errors + aborts, "{label}");
    // Aborts as 499: every request has a line, and the 5xx are the real ones.
    assert_eq!(as_499.lines, as_499.requests_sent, "{label}");
    assert_eq!(as_499.lines_499, aborts, "{label}");
    assert_eq!(as_499.lines_5xx, real_errors, "{label}");
    assert!(as_499.error_rate_pct < as_500.error_rate_pct, "{label}");
}
