//! The library's own tests, moved here from `#[cfg(test)]` modules: a library's unit
//! tests are a second build of the whole library at opt-level 3 (8 to 9 s here);
//! in this binary they reuse the library `cargo xtask book` built.

/// `grpc_timeout.rs`
mod grpc_timeout {
    use std::time::Duration;

    use lab_cancellation::grpc_timeout::*;

    #[test]
    fn parses_every_unit_and_refuses_what_the_format_does_not_allow() {
        assert_eq!(parse("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse("2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse("10S"), Some(Duration::from_secs(10)));
        assert_eq!(parse("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse("7u"), Some(Duration::from_micros(7)));
        assert_eq!(parse("99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in ["", "m", "123456789m", "-5m", "5", "5s", "1.5S", "5 m"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn encoding_rounds_down_and_round_trips() {
        for budget in [
            Duration::from_nanos(5),
            Duration::from_micros(1_234_567),
            Duration::from_millis(9_750),
            Duration::from_secs(86_400 * 30),
        ] {
            let encoded = encode(budget);
            let back = parse(&encoded).expect("an encoded budget parses");
            assert!(back <= budget, "{budget:?} -> {encoded} -> {back:?}");
            assert!(
                budget - back < budget / 1000 + Duration::from_nanos(1),
                "{encoded}"
            );
        }
        assert_eq!(encode(Duration::from_millis(9_750)), "9750000u");
    }
}

/// `db.rs`
mod db {
    use lab_cancellation::db::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_connection_of_a_pool_sees_one_database_and_two_pools_do_not_share() {
        let first = SlowDatabase::open(3).expect("the first pool opens");
        let second = SlowDatabase::open(3).expect("the second pool opens");
        for _ in 0..3 {
            first.place_order(7).await.expect("an order is placed");
        }
        // Three inserts went through whichever connections the pool gave out;
        // all three connections, held at once, count all three: one database.
        let held = [
            first.pool.get().await.expect("a connection"),
            first.pool.get().await.expect("a second connection"),
            first.pool.get().await.expect("a third connection"),
        ];
        for connection in &held {
            let orders: i64 = connection
                .query_row("SELECT count(*) FROM orders WHERE request = 7", [], |row| {
                    row.get(0)
                })
                .expect("counted");
            assert_eq!(orders, 3);
        }
        drop(held);
        assert_eq!(second.orders_for(7).await.expect("counted"), 0);
    }
}
