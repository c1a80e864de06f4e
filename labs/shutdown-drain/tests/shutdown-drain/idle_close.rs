//! The idle-close race at deploy time, through the keep-alive lab's link
//! delay: the four ways of telling the balancer, run side by side as the lab
//! runs them, each asserted by its mechanism.
//!
//! Timing margins: as in `deploys.rs`, the drain wait is three readiness
//! periods (the lab's modes use two), so a poll a busy machine runs late
//! still sees the 503 long before the server closes; and the deploys of
//! `deploys.rs` do not run at the same time (the same lock).

use lab_kit::{Lab, Mode, Series};
use lab_shutdown_drain::{
    Config,
    idle_close::{BeforeClose, IdleCloseSummary, idle_close_race},
};

use crate::deploys::ONE_AT_A_TIME;

fn find(results: &[(BeforeClose, IdleCloseSummary)], case: BeforeClose) -> &IdleCloseSummary {
    lab_kit::concurrently::result_of(results, &case)
        .unwrap_or_else(|| panic!("no result for {}", case.series()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_connection_meets_the_close_unless_the_server_says_so_first() {
    let mut config = Config::for_mode(Mode::Quick);
    config.server_exe = env!("CARGO_BIN_EXE_lab-shutdown-drain").into();
    config.drain_wait_ms = 3 * config.readiness_period_ms;
    let _serial = ONE_AT_A_TIME.lock().await;
    let results = idle_close_race(&config).await.expect("the race runs");
    let link = config.race_link_delay_ms as f64;

    // Nothing told: requests leave on pooled connections the server has
    // closed; each left within about one link delay of the close (before
    // it, still crossing the link when the close came; after it, before the
    // FIN had crossed back).
    let keep_alive = find(&results, BeforeClose::KeepAlive);
    assert!(keep_alive.pooled_502 >= 1, "{keep_alive:#?}");
    let window = 3.0 * link + 30.0;
    assert!(
        keep_alive.pooled_502_first_sent_ms > -window
            && keep_alive.pooled_502_last_sent_ms < window,
        "the pooled 502s left within {window} ms of the close: {keep_alive:#?}"
    );

    // `Connection: close` on every response while draining: no connection
    // is left in the pool to race, but the balancer, never told, routes new
    // ones to a closed port.
    let connection_close = find(&results, BeforeClose::ConnectionClose);
    assert_eq!(connection_close.pooled_502, 0, "{connection_close:#?}");
    assert!(
        connection_close.new_connection_502 >= 1,
        "{connection_close:#?}"
    );

    // Readiness first and a wait: the balancer has left before the close.
    for case in [BeforeClose::ReadinessWait, BeforeClose::ReadinessAndClose] {
        let summary = find(&results, case);
        assert_eq!(summary.failed, 0, "{}: {summary:#?}", case.series());
        assert!(
            summary.noticed_after_ms > 0.0 && summary.noticed_after_ms < summary.close_after_ms
        );
    }
    for (case, summary) in &results {
        assert_eq!(summary.exit_code, 0, "{}: {summary:#?}", case.series());
        assert!(summary.to_server > 10, "{}: {summary:#?}", case.series());
    }
}
