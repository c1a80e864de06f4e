//! Part 4 in quick mode: through edge → middle → backend, with fixed
//! timeouts the backend's queries run on after the edge has given up (the
//! drop travels down the chain, but a query on the blocking pool is not a
//! future); with the budget propagated in `grpc-timeout`, the backend stops
//! its queries by the edge's deadline.

use lab_cancellation::{
    Config,
    chain::{ChainVariant, chain_case},
};
use lab_kit::{Lab, Mode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_propagated_deadline_stops_the_backend_by_the_edge_deadline() {
    let config = Config::for_mode(Mode::Quick);
    let fixed = chain_case(ChainVariant::FixedTimeouts, &config)
        .await
        .expect("the fixed chain runs");
    let propagated = chain_case(ChainVariant::PropagatedDeadline, &config)
        .await
        .expect("the propagated chain runs");
    let label = format!("{fixed:?}\n{propagated:?}");
    // Neither answers in time: the work is longer than the budget.
    assert_eq!(fixed.answered_200, 0, "{label}");
    assert_eq!(propagated.answered_200, 0, "{label}");
    // The running queries outlive the edge by a good part of their length...
    let remaining = config.chain_middle_work_s + config.chain_query_s - config.route_timeout_s;
    assert!(fixed.queries_run >= 1, "{label}");
    // Only the queries that had a connection when the edge gave up ran: the
    // edge's dropped call closed its connection, and the drop travelled down
    // to the backend's handlers still waiting for the pool.
    assert!(fixed.queries_run <= config.chain_pool as u64, "{label}");
    // The query's length comes from a calibration of SQLite's speed made
    // at the start of the case: on a machine that was busy then, the query
    // is shorter than planned (one CI run saw 1.0 s of the planned 5 s after
    // the deadline), so this asserts that it outlived the deadline, by a
    // clear margin over the propagated chain, not by how much.
    assert!(remaining > 1.0, "{label}");
    assert!(
        fixed.longest_query_after_deadline_s > 0.5
            && fixed.longest_query_after_deadline_s
                > propagated.longest_query_after_deadline_s + 0.4,
        "{label}"
    );
    // ...and with the budget propagated they end by the deadline (a margin
    // of 1 s, production, for SQLite's next progress check on a busy machine).
    assert!(propagated.longest_query_after_deadline_s < 1.0, "{label}");
    assert!(
        propagated.query_s_after_deadline < fixed.query_s_after_deadline / 3.0,
        "{label}"
    );
}
