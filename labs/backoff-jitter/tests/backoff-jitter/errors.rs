//! Which errors the policy retries, on real sockets and a real name server:
//! a final answer (400, 404, 500, 200) is sent once; 429, 502, 503, 504, a
//! timeout, a refused connection, a reset and a failed lookup are retried to
//! the last attempt. A SERVFAIL costs more queries than attempts (the
//! resolver asks again itself); an NXDOMAIN fewer (its negative answer is
//! cached). Counts, not timings: nothing here depends on the machine's speed.

use lab_backoff_jitter::{Config, errors};
use lab_kit::{Lab, Mode, Output};

use crate::number;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn final_answers_are_sent_once_and_transient_failures_retried() {
    let config = Config::for_mode(Mode::Quick);
    let mut out = Output::collect();
    errors::run(&config, &mut out).await.expect("the part runs");
    let attempts = |kind: &str| number(&out, &format!("errors/{kind}"), "attempts_per_call");
    let reached = |kind: &str| number(&out, &format!("errors/{kind}"), "reached_per_call");
    for kind in ["400", "404", "500", "200"] {
        assert_eq!(attempts(kind), 1.0, "{kind}");
        assert_eq!(reached(kind), 1.0, "{kind}");
    }
    let last = f64::from(config.max_attempts);
    for kind in [
        "429", "502", "503", "504", "timeout", "refused", "reset", "servfail", "nxdomain",
    ] {
        assert_eq!(attempts(kind), last, "{kind}");
    }
    // reqwest reports a failed lookup as a connect error, as it does a
    // refused connection: the policy cannot tell them apart by kind.
    for kind in ["servfail", "nxdomain", "refused"] {
        let outcome = out
            .summary(&format!("errors/{kind}"))
            .and_then(|point| point.values.get("outcome"))
            .map(|value| value.display());
        assert_eq!(outcome.as_deref(), Some("connect"), "{kind}");
    }
    assert_eq!(reached("refused"), 0.0);
    assert_eq!(reached("503"), last);
    assert!(reached("servfail") > attempts("servfail"));
    assert!(reached("nxdomain") < attempts("nxdomain"));
}
