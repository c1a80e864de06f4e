//! The whole lab in quick mode, called in-process as the xtask calls it:
//! every record the charts need, and the mechanism in the right direction.
//!
//! Margins: a probe may run late on a busy 2-core machine, and a late probe
//! makes a decision late, never early. So the readiness timings are checked
//! against the earliest the thresholds allow and against the worst case
//! plus one period; a fast probe gets twice the quick mode's timeout and a
//! slow query stays well above that.

use lab_health_checks::{Config, LivenessCheck};
use lab_kit::{Lab, Mode, Output, Series};

fn number(out: &Output, series: &str, field: &str) -> f64 {
    out.summary(series)
        .unwrap_or_else(|| panic!("no summary for {series}"))
        .number(field)
        .unwrap_or_else(|error| panic!("{error:#}"))
}

fn config() -> Config {
    let mut config = Config::for_mode(Mode::Quick);
    config.liveness_timeout_ms *= 2;
    config.readiness_timeout_ms *= 2;
    config.slow_query_ms = 3 * config.liveness_timeout_ms.max(config.readiness_timeout_ms);
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quick_run_measures_what_each_probe_decides() -> anyhow::Result<()> {
    let config = config();
    let out = lab_kit::lab::quick_run(&config).await?;
    assert_eq!(
        out.meta().map(|meta| meta.time_scale),
        Some(config.time_scale)
    );
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
    for (change, bound_name, threshold, since) in [
        (
            "stopped",
            "stop",
            config.readiness_failure_threshold,
            "the slow start",
        ),
        (
            "started",
            "start",
            config.readiness_success_threshold,
            "recovery",
        ),
    ] {
        let after = number(&out, readiness, &format!("{change}_routing_after_ms"));
        let bound = number(&out, readiness, &format!("{bound_name}_bound_ms"));
        let earliest = (threshold - 1) as f64 * period;
        assert!(
            after >= earliest && after <= bound + period,
            "{change} routing {after} ms after {since} (bound {bound})"
        );
    }

    // The simulation: checking the database in liveness restarts the fleet.
    assert!(number(&out, "fleet/liveness-checks-db", "restarts") > 0.0);
    assert_eq!(
        number(&out, "fleet/liveness-checks-process", "restarts"),
        0.0
    );

    // The cascade: readiness that asks a shared dependency takes every pod
    // out at once; without hysteresis on every blip (each blip outlasts a
    // period, so each pod's probe meets it), with it only in the outage; a
    // flag never does. Spurious timeouts on a busy machine can add exits,
    // never remove the ones a blip causes.
    let pods = config.cascade_pods as f64;
    let blips = lab_health_checks::cascade::schedule::BLIP_STARTS_MS.len() as f64;
    let eager = "cascade/db-check-1-1";
    let hysteresis = "cascade/db-check-3-2";
    let flag = "cascade/flag-only";
    assert!(number(&out, eager, "rotation_exits") >= pods * (blips + 1.0));
    assert!(number(&out, hysteresis, "rotation_exits") >= pods);
    assert!(
        number(&out, eager, "zero_endpoints_ms") > number(&out, hysteresis, "zero_endpoints_ms")
    );
    assert!(number(&out, hysteresis, "zero_endpoints_ms") > 0.0);
    assert_eq!(number(&out, flag, "zero_endpoints_ms"), 0.0);
    Ok(())
}
