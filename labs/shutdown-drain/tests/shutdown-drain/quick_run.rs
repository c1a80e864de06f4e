//! The whole lab in quick mode, called in-process as the workspace tests and
//! the xtask call it: every record it promises the charts, in the right
//! direction. (The per-deploy tests in `deploys.rs` hold the exact claims.)

use lab_kit::{Lab, Mode, Output, Record, Series};
use lab_shutdown_drain::{Config, DeployCase};

fn number(out: &Output, series: &str, field: &str) -> f64 {
    out.summary(series)
        .unwrap_or_else(|| panic!("no summary for {series}"))
        .number(field)
        .unwrap_or_else(|error| panic!("{error:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quick_run_writes_every_series_the_charts_need() -> anyhow::Result<()> {
    let mut config = Config::for_mode(Mode::Quick);
    config.server_exe = env!("CARGO_BIN_EXE_lab-shutdown-drain").into();
    let out = lab_kit::lab::quick_run(&config).await?;
    assert_eq!(
        out.meta().map(|meta| meta.time_scale),
        Some(config.time_scale)
    );

    for case in DeployCase::ALL {
        let name = case.series();
        for kind in ["work", "slow", "stream", "not-ready"] {
            let series = format!("{name}/{kind}");
            assert!(out.samples(&series).count() > 0, "no samples for {series}");
        }
    }
    // Direction, with room for a noisy machine: the naive deploy fails more
    // than the full sequence, and each ends the way its variant must.
    assert!(number(&out, "exit-at-once", "failed") > number(&out, "full", "failed"));
    assert_eq!(number(&out, "exit-at-once", "exit_code"), 143.0);
    assert_eq!(number(&out, "graceful-only", "exit_code"), 137.0);
    assert_eq!(number(&out, "full", "exit_code"), 0.0);
    assert_eq!(number(&out, "full-stuck-stream", "exit_code"), 1.0);
    for case in DeployCase::ALL {
        assert_eq!(number(&out, &case.series(), "lost_writes"), 0.0);
    }
    // The probe agrees with the deploys on the same server.
    assert_eq!(number(&out, "probe/exit-at-once", "exit_code"), 143.0);
    assert_eq!(number(&out, "probe/full", "exit_code"), 0.0);
    assert_eq!(number(&out, "probe/full", "in_flight_failed"), 0.0);
    // Every timeline sample sits exactly on its outcome's row: the chart
    // spreads overlapping bars into lanes itself.
    let rows = [-1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
    for record in out.records() {
        if let Record::Sample(point) = record {
            let row = point.values.get("row").and_then(|value| value.as_f64());
            assert!(
                row.is_some_and(|row| rows.contains(&row)),
                "{}: row {row:?}",
                point.series
            );
        }
    }
    Ok(())
}
