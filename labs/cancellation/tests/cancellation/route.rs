//! Part 2 in quick mode: every route timeout answers once (one status line),
//! the naive one leaves its spawned work running and places the order after
//! answering 503, `TimeoutLayer` stops what the handler awaits but not the
//! blocking query, and the token stops the query too.

use std::sync::Arc;

use lab_cancellation::{
    Config,
    db::SlowDatabase,
    route_timeout::{RouteTimeout, route_case},
};
use lab_kit::{Lab, Mode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_timeout_answers_once_and_stops_only_what_it_owns() {
    let config = Config::for_mode(Mode::Quick);
    let database = Arc::new(SlowDatabase::open(config.pool_size).expect("the database opens"));
    for kind in RouteTimeout::ALL {
        let case = route_case(kind, Arc::clone(&database), &config)
            .await
            .expect("the case runs");
        let label = format!("{case:?}");
        assert_eq!(case.status, 503, "{label}");
        assert_eq!(case.responses, 1, "{label}");
        match kind {
            RouteTimeout::SpawnedRace => {
                assert!(case.downstream_completed, "{label}");
                assert_eq!(case.query_outcome, "completed", "{label}");
                assert_eq!(case.orders_after_503, 1, "{label}");
            }
            RouteTimeout::TowerLayer => {
                assert!(!case.downstream_completed, "{label}");
                assert!(case.downstream_after_answer_s < 1.0, "{label}");
                assert_eq!(case.query_outcome, "completed", "{label}");
                assert_eq!(case.orders_after_503, 0, "{label}");
            }
            RouteTimeout::TowerLayerToken => {
                assert!(!case.downstream_completed, "{label}");
                assert_eq!(case.query_outcome, "interrupted", "{label}");
                assert!(case.query_after_answer_s < 1.0, "{label}");
                assert_eq!(case.orders_after_503, 0, "{label}");
            }
        }
    }
}
