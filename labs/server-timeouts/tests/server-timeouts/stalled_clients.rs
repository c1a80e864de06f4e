//! Acceptance tests of the server-timeouts lab: the direction of each server
//! setup against each stalled client, with short timeouts, and the whole lab
//! in quick mode, called in-process, as the chapter reads it.

use std::time::Duration;

use lab_kit::{Lab, Mode, Record, Value};
use lab_server_timeouts::{Config, Hardening, ServerSetup, StalledClient, watch};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_defaults_point_the_right_way() {
    let window = Duration::from_millis(1500);
    let axum = ServerSetup::AxumServe.spawn().await.unwrap();
    let hyper = ServerSetup::HyperTimer {
        header_read_timeout: Duration::from_millis(400),
    }
    .spawn()
    .await
    .unwrap();
    let hardened = ServerSetup::Hardened(Hardening {
        header_read_timeout: Duration::from_millis(400),
        request_body_timeout: Duration::from_millis(300),
        handler_deadline: Duration::from_millis(300),
    })
    .spawn()
    .await
    .unwrap();
    let (axum_half, hyper_half, hyper_body, hardened_body, hardened_hang) = tokio::join!(
        watch(axum.addr(), StalledClient::HalfHeader, window),
        watch(hyper.addr(), StalledClient::HalfHeader, window),
        watch(hyper.addr(), StalledClient::StalledBody, window),
        watch(hardened.addr(), StalledClient::StalledBody, window),
        watch(hardened.addr(), StalledClient::HungHandler, window),
    );
    // axum::serve: no timer, a half-sent head holds the connection.
    assert_eq!(axum_half.unwrap().verdict(), "still open");
    // hyper with a timer closes it, but does not time out a stalled body.
    let hyper_half = hyper_half.unwrap();
    assert!(hyper_half.closed.is_some(), "{hyper_half:?}");
    assert_eq!(hyper_body.unwrap().verdict(), "still open");
    // The hardened server answers both.
    let body = hardened_body.unwrap();
    assert!(
        body.answered.is_some_and(|(status, _)| status >= 400),
        "{body:?}"
    );
    let hang = hardened_hang.unwrap();
    assert_eq!(
        hang.answered.map(|(status, _)| status),
        Some(503),
        "{hang:?}"
    );
}

/// A field of the one summary named `series`.
fn summary_field<'a>(records: &'a [Record], series: &str, field: &str) -> &'a Value {
    let mut found = records.iter().filter_map(|record| match record {
        Record::Summary(point) if point.series == series => Some(point),
        _ => None,
    });
    let point = found
        .next()
        .unwrap_or_else(|| panic!("no summary {series}"));
    assert!(found.next().is_none(), "two summaries {series}");
    point
        .values
        .get(field)
        .unwrap_or_else(|| panic!("{series} has no {field}"))
}

fn number(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value:?}"))
}

fn text(value: &Value) -> &str {
    match value {
        Value::Text(text) => text,
        other => panic!("not text: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quick_run_holds_what_the_chapter_says() {
    let mut config = Config::for_mode(Mode::Quick);
    config.fd_server_exe = env!("CARGO_BIN_EXE_lab-server-timeouts").into();
    let out = lab_kit::lab::quick_run(&config).await.unwrap();
    let records = out.records();
    let window_s = config.window_s;
    for client in ["idle", "half-header", "stalled-body", "hung-handler"] {
        // axum::serve lets every stalled client keep its connection.
        let series = format!("axum-serve/{client}");
        assert_eq!(
            text(summary_field(records, &series, "verdict")),
            "still open"
        );
        assert_eq!(
            number(summary_field(records, &series, "closed_at_production_s")),
            window_s
        );
    }
    // hyper with a timer closes idle and half-sent connections at its header
    // read timeout (a margin of a fifth either way for a busy machine), and
    // leaves the stalled body and the stuck handler alone.
    for client in ["idle", "half-header"] {
        let closed = number(summary_field(
            records,
            &format!("hyper-timer/{client}"),
            "closed_at_production_s",
        ));
        let configured = config.hyper_header_read_s;
        assert!(
            (configured * 0.8..configured * 1.2).contains(&closed),
            "hyper-timer/{client} closed at {closed} s"
        );
    }
    for client in ["stalled-body", "hung-handler"] {
        let series = format!("hyper-timer/{client}");
        assert_eq!(
            text(summary_field(records, &series, "verdict")),
            "still open"
        );
    }
    // The hardened server answers the stalled body before its header read
    // timeout, and the stuck handler with a 503.
    let body = summary_field(records, "hardened/stalled-body", "at_production_s");
    assert!(number(body) < config.hardened_header_read_s, "{body:?}");
    let hang = text(summary_field(records, "hardened/hung-handler", "verdict"));
    assert!(hang.starts_with("answered 503"), "{hang}");
    // One bar per connection for the chart, in each setup's series.
    let bars = records
        .iter()
        .filter(|record| matches!(record, Record::Sample(_)))
        .count();
    assert_eq!(bars, 3 * 4);
    // The descriptor part's rows, and the proxy part's direct path (the
    // nginx paths only where nginx is installed).
    for series in [
        "descriptors/lab-process",
        "descriptors/axum-serve",
        "descriptors/hardened",
        "buffering/direct",
    ] {
        assert!(
            records
                .iter()
                .any(|record| matches!(record, Record::Summary(point) if point.series == series)),
            "no summary {series}"
        );
    }
}
