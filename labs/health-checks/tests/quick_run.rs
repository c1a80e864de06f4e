//! The whole lab in quick mode, called in-process as the xtask calls it:
//! every record the charts need, and the mechanism in the right direction.
//!
//! Margins: a probe may run late on a busy 2-core machine, and a late probe
//! makes a decision late, never early. So the readiness timings are checked
//! against the earliest the thresholds allow and against the worst case
//! plus one period; a fast probe gets twice the quick mode's timeout and a
//! slow query stays well above that.

use lab_health_checks::{HealthConfig, LivenessCheck, SLUG, run};
use lab_kit::{Mode, Output, Record, Series};

fn number(out: &Output, series: &str, field: &str) -> f64 {
    out.summary(series)
        .unwrap_or_else(|| panic!("no summary for {series}"))
        .number(field)
        .unwrap_or_else(|error| panic!("{error:#}"))
}

fn config() -> HealthConfig {
    let mut config = HealthConfig::for_mode(Mode::Quick);
    config.liveness_timeout_ms *= 2;
    config.readiness_timeout_ms *= 2;
    config.slow_query_ms = 3 * config.liveness_timeout_ms.max(config.readiness_timeout_ms);
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quick_run_measures_what_each_probe_decides() {
    let config = config();
    let mut out = Output::collect();
    run(Mode::Quick, &config, &mut out)
        .await
        .expect("the quick run completes");
    let Record::Meta(meta) = &out.records()[0] else {
        panic!("the first record is meta")
    };
    assert_eq!(meta.lab, SLUG);
    assert_eq!(meta.time_scale, config.time_scale);
    for series in ["probe-ok", "probe-failed", "not-routed", "dependency-slow"] {
        assert!(out.samples(series).count() > 0, "no samples for {series}");
    }

    let slow_from = config.dependency_slow_from_ms as f64;
    let slow_until = config.dependency_slow_until_ms as f64;
    let process = LivenessCheck::Process.series();
    let database = LivenessCheck::Database.series();
    // Liveness that answers from the process never fails the threshold;
    // liveness that queries the dependency restarts the pod, and only while
    // the dependency is slow.
    assert_eq!(number(&out, &process, "restarts"), 0.0);
    assert!(number(&out, &database, "restarts") >= 1.0);
    let Some(lab_kit::Value::List(restarts)) = out
        .summary(&database)
        .and_then(|point| point.values.get("restarts_at_ms"))
    else {
        panic!("no restart times")
    };
    let late = (config.liveness_period_ms + config.liveness_timeout_ms) as f64;
    for restart in restarts {
        let at = restart.as_f64().expect("a number");
        assert!(
            at > slow_from && at < slow_until + late,
            "restart at {at} ms"
        );
    }
    let first = number(&out, &database, "first_restart_after_ms");
    let earliest =
        ((config.liveness_failure_threshold - 1) as u64 * config.liveness_period_ms) as f64;
    assert!(
        first >= earliest,
        "first restart {first} ms after the slow start"
    );

    // Readiness takes the pod out once and puts it back once, within what
    // its period and thresholds allow.
    let readiness = "readiness-checks-db";
    assert_eq!(number(&out, readiness, "left_rotation"), 1.0);
    let period = config.readiness_period_ms as f64;
    let stopped = number(&out, readiness, "stopped_routing_after_ms");
    let stop_bound = number(&out, readiness, "stop_bound_ms");
    let stop_earliest = (config.readiness_failure_threshold - 1) as f64 * period;
    assert!(
        stopped >= stop_earliest && stopped <= stop_bound + period,
        "stopped routing {stopped} ms after the slow start (bound {stop_bound})"
    );
    let started = number(&out, readiness, "started_routing_after_ms");
    let start_bound = number(&out, readiness, "start_bound_ms");
    let start_earliest = (config.readiness_success_threshold - 1) as f64 * period;
    assert!(
        started >= start_earliest && started <= start_bound + period,
        "started routing {started} ms after recovery (bound {start_bound})"
    );

    // The simulation: checking the database in liveness restarts the fleet.
    assert!(number(&out, "fleet/liveness-checks-db", "restarts") > 0.0);
    assert_eq!(
        number(&out, "fleet/liveness-checks-process", "restarts"),
        0.0
    );
}
