//! Part 1 in quick mode, in-process on 127.0.0.1: when the client leaves,
//! the work awaited in the handler's future stops, spawned work does not,
//! and the query stops only when it is told (the token reaches SQLite's
//! progress handler). Margins: "stopped" means within 3 of the 10 seconds
//! (production) of work that were left, "ran on" means it finished.

use std::sync::Arc;

use lab_cancellation::{
    Config,
    db::SlowDatabase,
    leave::{LeaveSetup, LeaveVariant, leave_case},
};
use lab_kit::{Lab, Mode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_stops_when_the_client_leaves_only_where_the_request_owns_it() {
    let config = Config::for_mode(Mode::Quick);
    let database = Arc::new(SlowDatabase::open(config.pool_size).expect("the database opens"));
    for setup in LeaveSetup::all() {
        let variant = setup.variant;
        let case = leave_case(setup, Arc::clone(&database), &config)
            .await
            .expect("the case runs");
        let label = format!("{case:?}");
        match variant {
            LeaveVariant::Plain | LeaveVariant::Token | LeaveVariant::TokenInterrupt => {
                assert!(!case.downstream_completed, "{label}");
                assert!(case.downstream_after_leave_s < 3.0, "{label}");
            }
            LeaveVariant::Spawn | LeaveVariant::SpawnBlocking => {
                assert!(case.downstream_completed, "{label}");
                assert!(case.downstream_after_leave_s > 5.0, "{label}");
            }
        }
        if variant == LeaveVariant::TokenInterrupt {
            assert_eq!(case.query_outcome, "interrupted", "{label}");
            assert!(case.query_after_leave_s < 3.0, "{label}");
            assert!(case.work_stopped, "{label}");
        } else {
            // A query on the blocking pool runs to its end: nothing told it.
            assert_eq!(case.query_outcome, "completed", "{label}");
            assert!(!case.work_stopped, "{label}");
        }
    }
}
