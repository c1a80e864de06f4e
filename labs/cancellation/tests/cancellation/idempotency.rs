//! Part 8 in quick mode: a client that retries a payment whose charge takes
//! longer than it waits pays twice, unless the server records the key as in
//! progress before it charges. Counts, not times, so the margins are the
//! mechanism itself: slow payments exist, each costs the naive servers a
//! second charge, and the in-progress record costs none.

use lab_cancellation::{
    Config,
    idempotency::{KeyHandling, run_idempotency},
};
use lab_kit::{Lab, Mode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_payment_is_charged_once_only_with_an_in_progress_record() {
    let config = Config::for_mode(Mode::Quick);
    let slow_payments = config.payments / config.pay_slow_every;
    let counts = run_idempotency(&config).await.expect("the part runs");
    for (handling, paid) in KeyHandling::ALL.iter().zip(&counts) {
        let label = format!("{paid:?}");
        assert_eq!(paid.server, handling.name(), "{label}");
        assert!(paid.requests > paid.payments, "the client retried: {label}");
        match handling {
            KeyHandling::None | KeyHandling::AnswerOnly => {
                assert!(paid.payments_charged_twice >= slow_payments / 2, "{label}");
                assert!(
                    paid.duplicate_charges >= paid.payments_charged_twice,
                    "{label}"
                );
                assert_eq!(paid.conflicts, 0, "{label}");
            }
            KeyHandling::InProgress => {
                assert_eq!(paid.duplicate_charges, 0, "{label}");
                assert_eq!(paid.charges, paid.payments, "{label}");
                assert_eq!(paid.payments_confirmed, paid.payments, "{label}");
                assert!(paid.conflicts >= slow_payments, "{label}");
                assert!(paid.replays >= slow_payments / 2, "{label}");
            }
        }
    }
    // The server that ignores the key never confirms a slow payment: every
    // try starts a charge that outlasts the client's wait.
    assert!(
        counts[0].payments_confirmed < counts[0].payments,
        "{:?}",
        counts[0]
    );
}
