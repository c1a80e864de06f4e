//! The cost part: three client processes calling a provider that never
//! answers. Without a timeout every call is still waiting at the end, with
//! its socket; a timeout levels the count off near rate x timeout; a
//! bulkhead holds its limit and refuses the rest. Margins: a busy machine
//! sends fewer calls on time (the loop bursts to catch up) and closes
//! sockets late, never the other way round.

use lab_client_timeouts::{Config, cost};
use lab_kit::{Lab, Mode, Output};

fn number(out: &Output, series: &str, field: &str) -> f64 {
    out.summary(series)
        .unwrap_or_else(|| panic!("no summary for {series}"))
        .number(field)
        .unwrap_or_else(|error| panic!("{error:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_costs_sockets_and_memory_until_a_timeout_or_a_bulkhead_bounds_it() {
    let mut config = Config::for_mode(Mode::Quick);
    config.cost_exe = env!("CARGO_BIN_EXE_lab-client-timeouts").into();
    let mut out = Output::collect();
    cost::run_cost(&config, &mut out)
        .await
        .expect("the cost part runs");

    let (none, timeout, bulkhead) = ("cost/no-timeout", "cost/timeout", "cost/bulkhead");
    let sent = number(&out, none, "sent");
    assert!(sent >= 0.9 * config.cost_rate_per_s * config.cost_run_real_s);
    // No timeout: nothing ends.
    assert!(number(&out, none, "peak_in_flight") >= 0.95 * sent);
    assert_eq!(number(&out, none, "timed_out"), 0.0);
    assert!(number(&out, none, "peak_sockets") >= 0.95 * sent);
    // A timeout: calls end, and at most about rate x timeout wait at once.
    let plateau = config.cost_rate_per_s * config.cost_timeout_real_s;
    assert!(number(&out, timeout, "timed_out") > 0.0);
    assert!(number(&out, timeout, "peak_in_flight") <= 1.25 * plateau);
    assert!(number(&out, timeout, "peak_in_flight") < 0.75 * number(&out, none, "peak_in_flight"));
    // A bulkhead: its limit, and every other call refused.
    let limit = config.cost_bulkhead_limit as f64;
    assert_eq!(number(&out, bulkhead, "peak_in_flight"), limit);
    assert!(
        number(&out, bulkhead, "refused_by_bulkhead") >= number(&out, bulkhead, "sent") - limit
    );
    assert!(number(&out, bulkhead, "peak_sockets") < number(&out, timeout, "peak_sockets"));
    // Memory follows the calls held: 400 waiting calls against 20.
    assert!(number(&out, none, "rss_growth_mb") > number(&out, bulkhead, "rss_growth_mb"));
}
