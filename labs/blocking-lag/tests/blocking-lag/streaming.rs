//! The report read from SQLite, in memory or streamed in pages, each by a
//! server process of its own: the same bytes either way; memory that grows
//! with the report against memory that does not; a first byte after the
//! whole report against one after the first page; and a read that fails
//! halfway, which must reach the client as a broken body.

use std::time::Duration;

use lab_blocking_lag::{
    Config, Delivery, HandlerSetup,
    report::build_report,
    report_server::ReportServerArgs,
    streaming::{ReportChild, stream_report},
};
use lab_kit::{Output, Series, record::Point};

use super::{SERIAL, lab_binary};

/// Enough rows that the report in memory (about 30 bytes of CSV a row, and
/// more for the rows themselves) dwarfs what a streamed page or two holds.
const ROWS: usize = 300_000;
const PAGE_ROWS: usize = 5_000;

fn number(point: &Point, field: &str) -> f64 {
    point
        .number(field)
        .unwrap_or_else(|error| panic!("{}: {error:#}", point.series))
}

fn summary_of(out: &Output, delivery: Delivery) -> &Point {
    out.summary(&delivery.series())
        .unwrap_or_else(|| panic!("no summary for {}", delivery.series()))
}

#[tokio::test(flavor = "multi_thread")]
async fn streaming_keeps_memory_flat_and_sends_the_first_byte_early() {
    let _one_at_a_time = SERIAL.lock().await;
    let mut config = Config::with_variants(ROWS, 200, &HandlerSetup::ALL, lab_binary());
    (config.stream_rows, config.page_rows) = (ROWS, PAGE_ROWS);
    let out = Output::collect_part(&config, async |config, out| {
        stream_report(config, out).await
    })
    .await
    .unwrap_or_else(|error| panic!("the streaming part: {error:#}"));
    let in_memory = summary_of(&out, Delivery::InMemory);
    let streamed = summary_of(&out, Delivery::Streamed);
    eprintln!("{in_memory:?}\n{streamed:?}");

    // The same report, byte for byte, as the lab's own report renders it.
    let built = build_report(ROWS);
    for point in [in_memory, streamed] {
        assert_eq!(number(point, "bytes"), built.bytes as f64, "{point:?}");
        assert_eq!(
            point.values["checksum"].display(),
            format!("{:016x}", built.checksum),
            "{point:?}"
        );
        assert_eq!(number(point, "health_failed"), 0.0, "{point:?}");
    }
    // The mechanism: one body against one page at a time.
    assert_eq!(number(in_memory, "pages"), 0.0);
    assert_eq!(number(streamed, "pages"), ROWS.div_ceil(PAGE_ROWS) as f64);
    assert!(number(streamed, "body_frames") >= 10.0, "{streamed:?}");

    // Memory: the report in memory holds at least its whole CSV at once;
    // the streamed one holds a few pages, far less than a quarter of it.
    let report_mb = built.bytes as f64 / (1024.0 * 1024.0);
    let in_memory_growth = number(in_memory, "growth_mb");
    let streamed_growth = number(streamed, "growth_mb");
    assert!(
        in_memory_growth >= 0.9 * report_mb,
        "in memory the server grew by {in_memory_growth:.1} MiB for a {report_mb:.1} MiB report"
    );
    assert!(
        streamed_growth < 0.25 * report_mb,
        "streamed the server grew by {streamed_growth:.1} MiB for a {report_mb:.1} MiB report"
    );

    // The first byte: after the whole report, against after the first page
    // (one page in sixty; a third is the margin for a busy machine).
    let in_memory_first = number(in_memory, "first_byte_ms");
    let streamed_first = number(streamed, "first_byte_ms");
    assert!(
        streamed_first < in_memory_first / 3.0,
        "first byte streamed {streamed_first:.1} ms, in memory {in_memory_first:.1} ms"
    );
    // In memory, the head and the body leave together, after the work.
    assert!(
        number(in_memory, "headers_ms") >= 0.5 * in_memory_first,
        "{in_memory:?}"
    );

    // A memory sample per few milliseconds was written for each.
    for delivery in Delivery::ALL {
        let samples = out.samples(&format!("rss-{}", delivery.series())).count();
        assert!(samples >= 10, "{samples} memory samples for {delivery:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_that_fails_halfway_breaks_the_body_off() {
    // 20 pages of 1,000 rows; the database "goes away" after the third.
    let (rows, page_rows, fail_after) = (20_000, 1_000, 3);
    let server = ReportChild::start(
        &lab_binary(),
        &ReportServerArgs {
            delivery: Delivery::Streamed,
            rows,
            page_rows,
            max: Duration::from_secs(30),
            fail_after_pages: Some(fail_after),
        },
    )
    .await
    .expect("the report server");
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("a client");
    let mut response = client
        .get(format!("http://{}/report", server.addr))
        .send()
        .await
        .expect("the response head");
    // The status left before the read failed: it says 200.
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let mut received = 0;
    let ended = loop {
        match response.chunk().await {
            Ok(Some(frame)) => received += frame.len(),
            Ok(None) => break Ok(()),
            Err(error) => break Err(error),
        }
    };
    // The client sees a broken body, not a shorter report that looks whole.
    assert!(
        ended.is_err(),
        "the body ended cleanly after {received} bytes"
    );
    let whole = build_report(rows).bytes;
    assert!(
        received > 0 && received < whole,
        "{received} of {whole} bytes"
    );
    let pages = server.stop().await.expect("the server stops");
    assert_eq!(pages, fail_after);
}

#[test]
fn the_report_server_refuses_an_unknown_delivery_and_exits_two() {
    let output = std::process::Command::new(lab_binary())
        .args(["__report_server", "--delivery", "sideways"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running the report server");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("in-memory or streamed"), "{stderr}");
}
