//! Part 5 in quick mode: after the dependency's two slow seconds, callers
//! that retry at once (with or without jitter) keep it overloaded to the end
//! of the run; a retry budget, a breaker or a dependency that sheds recover.

use lab_kit::{Lab, Mode, Output};
use lab_overload::{Config, storm::run_storm};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_storm_outlives_its_cause_unless_something_bounds_the_retries() -> anyhow::Result<()> {
    let _apart = crate::APART.lock().await;
    let config = Config::for_mode(Mode::Quick);
    let out = Output::collect_part(&config, run_storm).await?;
    let label = format!("{:#?}", out.records());
    let summary = |series: &str| {
        out.summary(series)
            .unwrap_or_else(|| panic!("no summary for {series}"))
            .clone()
    };
    for sustained in ["storm/naive", "storm/backoff-jitter"] {
        let point = summary(sustained);
        assert!(
            point.number("late_goodput_pct").expect("late") < 30.0,
            "{sustained}: {label}"
        );
        assert!(
            !point.values.contains_key("recovered_at_s"),
            "{sustained}: {label}"
        );
        // Every user that met the outage's aftermath used all its attempts.
        assert!(
            point.number("amplification").expect("amplification") > 2.5,
            "{sustained}: {label}"
        );
    }
    for protected in ["storm/retry-budget", "storm/breaker", "storm/server-sheds"] {
        let point = summary(protected);
        assert!(
            point.number("late_goodput_pct").expect("late") >= 70.0,
            "{protected}: {label}"
        );
        let recovered = point.number("recovered_at_s").expect("it recovered");
        assert!(
            recovered < config.storm_duration_s - 2.0,
            "{protected}: {label}"
        );
    }
    Ok(())
}
