//! The library's own tests, moved here from `#[cfg(test)]` modules: a library's unit
//! tests are a second build of the whole library at opt-level 3 (8 to 9 s here);
//! in this binary they reuse the library `cargo xtask book` built.

/// `streaming.rs`
mod streaming {
    use lab_kit::process::status_field_kib;

    #[test]
    fn reads_a_field_of_proc_status() {
        let status = "Name:\tlab\nVmHWM:\t  9000 kB\nVmRSS:\t   5120 kB\nThreads:\t2\n";
        assert_eq!(status_field_kib(status, "VmRSS"), Some(5120));
        assert_eq!(status_field_kib(status, "VmHWM"), Some(9000));
        assert_eq!(status_field_kib(status, "VmSwap"), None);
    }
}

/// `report.rs`
mod report {
    use lab_blocking_lag::report::*;

    #[tokio::test]
    async fn chunked_and_blocking_reports_are_the_same_bytes() {
        for (rows, chunk) in [
            (0, 7),
            (1, 7),
            (1000, 7),
            (2345, 100),
            (5000, 5000),
            (999, 1),
        ] {
            let blocking = build_report(rows);
            let chunked = build_report_chunked(rows, chunk).await;
            assert_eq!(blocking, chunked, "rows {rows}, chunk {chunk}");
        }
        assert!(build_report(1000).bytes > 1000 * 20);
    }
}

/// `orders.rs`
mod orders {
    use lab_blocking_lag::orders::*;
    use lab_blocking_lag::report::{FNV_START, build_report, checksum};

    #[test]
    fn both_readings_render_the_reports_bytes() {
        for (rows, page_rows) in [(0, 3), (1, 3), (2345, 100), (1000, 1000), (999, 1)] {
            // The tests share a process: a database of its own each.
            let name = format!("/orders-test-{rows}-{page_rows}");
            let connection = open_orders(&name, rows).expect("the orders database");
            let whole = report_in_memory(&connection).expect("the report in memory");
            let mut paged = String::new();
            let pages = report_in_pages(&connection, page_rows, |page| {
                paged.push_str(&page);
                true
            })
            .expect("the report in pages");
            assert_eq!(whole, paged, "rows {rows}, page {page_rows}");
            assert_eq!(pages, rows.div_ceil(page_rows), "rows {rows}");
            let built = build_report(rows);
            assert_eq!(whole.len(), built.bytes, "rows {rows}");
            assert_eq!(checksum(FNV_START, whole.as_bytes()), built.checksum);
        }
    }

    #[test]
    fn reading_in_pages_stops_when_the_client_is_gone() {
        let connection = open_orders("/orders-test-gone", 1000).expect("the orders database");
        let mut seen = 0;
        let pages = report_in_pages(&connection, 100, |_| {
            seen += 1;
            seen < 3
        })
        .expect("the report in pages");
        assert_eq!(pages, 3);
    }
}
