//! The whole lab in quick mode, called in-process: the simulation is
//! deterministic and keeps the published ordering, the live scenarios and the
//! chain show their mechanisms, and the library table is filled from the run.

use lab_backoff_jitter::{Config, simulation};
use lab_kit::{Lab, Mode, Output, record::Point};

fn number(point: &Point, field: &str) -> f64 {
    point
        .number(field)
        .unwrap_or_else(|error| panic!("{error:#}"))
}

#[test]
fn the_simulation_half_is_deterministic() {
    let config = Config::for_mode(Mode::Quick);
    let mut first = Output::collect();
    let mut second = Output::collect();
    simulation(&config, &mut first).expect("simulates");
    simulation(&config, &mut second).expect("simulates");
    assert_eq!(first.records(), second.records());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_run_shows_every_mechanism() -> anyhow::Result<()> {
    let config = Config::for_mode(Mode::Quick);
    let out = lab_kit::lab::quick_run(&config).await?;
    let summary = |series: &str| {
        out.summary(series)
            .unwrap_or_else(|| panic!("no summary for {series}"))
            .clone()
    };

    // The published ordering at 100 clients.
    let calls = |name: &str| number(&summary(&format!("sim-{name}")), "calls");
    assert!(calls("full-jitter") * 2.0 < calls("exponential"));
    assert!(calls("exponential") < calls("none"));

    // Live: callers that honour Retry-After never come back early, and need
    // fewer requests than callers that guess.
    for name in ["live-retry-after", "live-429-http-date"] {
        let point = summary(name);
        assert_eq!(number(&point, "early_attempts"), 0.0, "{name}");
        assert_eq!(number(&point, "failed"), 0.0, "{name}");
    }
    assert!(
        number(&summary("live-retry-after"), "calls") < number(&summary("live-no-jitter"), "calls")
    );
    // Against a fixed outage, full jitter spends its attempts sooner: more
    // calls than no jitter, and some callers out of attempts before recovery.
    let full_jitter = summary("live-full-jitter");
    assert!(number(&full_jitter, "calls") > number(&summary("live-no-jitter"), "calls"));
    assert!(number(&full_jitter, "failed") > 0.0);
    // The budget turns the storm into fast failures: retries near its ratio.
    let budget = summary("live-budget");
    let callers = number(&budget, "callers");
    assert!(
        number(&budget, "retries")
            <= config.budget_ratio * callers + f64::from(config.budget_initial_tokens)
    );
    // Every caller gives up or succeeds within the total deadline (plus slop).
    for name in [
        "live-no-jitter",
        "live-full-jitter",
        "live-retry-after",
        "live-budget",
    ] {
        assert!(number(&summary(name), "max_ms") <= config.total_deadline_ms as f64 + 200.0);
    }

    // Libraries: ours and backon with `adjust` honour Retry-After and leave a
    // keyless POST alone; the table records whatever the others did.
    for name in ["lib-ours", "lib-backon-adjust"] {
        let point = summary(name);
        assert_eq!(number(&point, "early_attempts"), 0.0, "{name}");
        assert_eq!(number(&point, "keyless_post_calls"), 1.0, "{name}");
    }
    for name in ["lib-backon", "lib-reqwest-retry"] {
        assert!(number(&summary(name), "get_calls") > 0.0, "{name}");
    }

    // Amplification: with three attempts per hop (two retries), 3^hops when
    // every hop retries, 3 when only the edge does.
    for point in out.samples("chain-every-layer") {
        assert_eq!(
            number(point, "dependency_calls"),
            number(point, "predicted")
        );
    }
    for point in out.samples("chain-edge-only") {
        assert_eq!(
            number(point, "dependency_calls"),
            f64::from(config.chain_attempts)
        );
    }
    assert_eq!(
        out.samples("chain-every-layer").count(),
        config.chain_depth as usize
    );
    let chain = summary(lab_backoff_jitter::chain::SUMMARY_SERIES);
    let attempts = f64::from(config.chain_attempts);
    assert_eq!(number(&chain, "attempts_per_hop"), attempts);
    assert_eq!(number(&chain, "retries_per_hop"), attempts - 1.0);
    assert_eq!(number(&chain, "hops"), f64::from(config.chain_depth));
    assert_eq!(
        number(&chain, "every_layer_calls"),
        attempts.powf(f64::from(config.chain_depth))
    );
    assert_eq!(number(&chain, "edge_only_calls"), attempts);
    Ok(())
}
