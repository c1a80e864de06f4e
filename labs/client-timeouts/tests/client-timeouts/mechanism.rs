//! The lab's mechanisms in quick mode, called in-process on 127.0.0.1: no
//! timeout leaves a silent downstream waiting at the lab's bound, each knob
//! catches the shapes it should, the two-phase timeout passes the four-step
//! check behind a tunnel, and the proxy never leaks an upstream request or
//! writes two responses. Margins are generous: a noisy 2-core machine must
//! not fail them, and each assertion still fails if the mechanism breaks.

use std::time::Duration;

use lab_client_timeouts::{
    Config,
    downstream::Shape,
    grid::{Setting, cell, run_grid},
    proxy,
    reuse::{Policy, check},
};
use lab_kit::{Lab, Mode};

fn config() -> Config {
    Config::for_mode(Mode::Quick)
}

/// Slack on the lab's clock for a timer to fire and the run to notice, on a
/// busy machine: a quarter of the lab's bound.
fn margin(config: &Config) -> Duration {
    config.lab(config.bound_s) / 4
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_timeout_a_silent_downstream_is_still_waiting_at_the_bound() {
    let config = config();
    let silent = cell(Shape::Silent, Setting::NoTimeout, &config)
        .await
        .expect("the cell runs");
    assert_eq!(silent.outcome, "still waiting at the bound");
    assert!(!silent.ended_by_client);
    assert!(silent.lab_ms >= config.lab(config.bound_s).as_secs_f64() * 1000.0);
    // The same downstream under a read timeout: caught before the head.
    let read = cell(Shape::Silent, Setting::ReadTimeout, &config)
        .await
        .expect("the cell runs");
    assert_eq!(read.outcome, "timed out before the head");
}

/// The whole grid, as the chapter's table of "which knob catches which
/// shape" states it: one row per shape, one column per setting, in the
/// order of `Setting::ALL` (none, connect, read, total, two-phase).
const CATCHES: [(&str, [&str; 5]); 7] = [
    (
        "no-handshake",
        [WAIT, "connect timeout", HEAD, HEAD, "connect timeout"],
    ),
    ("refuses", ["refused"; 5]),
    ("never-reads", [WAIT, WAIT, HEAD, HEAD, HEAD]),
    ("silent", [WAIT, WAIT, HEAD, HEAD, HEAD]),
    ("stalls-body", [READING, READING, BODY, BODY, BODY]),
    ("trickles", [READING, READING, READING, BODY, READING]),
    ("normal", ["answered"; 5]),
];
const WAIT: &str = "still waiting at the bound";
const READING: &str = "still reading at the bound";
const HEAD: &str = "timed out before the head";
const BODY: &str = "timed out in the body";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_knob_catches_its_shapes() {
    let config = config();
    let cells = run_grid(&config).await.expect("the grid runs");
    assert_eq!(cells.len(), 35);
    for (shape, outcomes) in CATCHES {
        for (setting, outcome) in Setting::ALL.iter().zip(outcomes) {
            let measured = cells
                .iter()
                .find(|cell| cell.shape == shape && cell.setting == setting.name())
                .expect("every cell ran");
            assert_eq!(measured.outcome, outcome, "{measured:?}");
        }
    }
    // The knobs that fire do so at their own deadline, not before; a margin
    // after it for a busy machine.
    let at = |shape: &str, setting: Setting| {
        cells
            .iter()
            .find(|cell| cell.shape == shape && cell.setting == setting.name())
            .expect("every cell ran")
            .lab_ms
    };
    let slack = margin(&config).as_secs_f64() * 1000.0;
    for (shape, setting, deadline_s) in [
        ("silent", Setting::ReadTimeout, config.read_timeout_s),
        ("silent", Setting::TotalTimeout, config.total_timeout_s),
        ("silent", Setting::TwoPhase, config.ttfb_timeout_s),
        (
            "no-handshake",
            Setting::ConnectTimeout,
            config.connect_timeout_s,
        ),
    ] {
        let deadline = config.lab(deadline_s).as_secs_f64() * 1000.0;
        let took = at(shape, setting);
        assert!(
            took >= deadline && took <= deadline + slack,
            "{shape} under {setting:?}: {took} ms for a {deadline} ms deadline"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_phase_passes_the_four_step_check() {
    let config = config();
    let steps = check(Policy::TwoPhase, &config)
        .await
        .expect("the check runs");
    assert_eq!(steps.len(), 4);
    for step in [&steps[0], &steps[1], &steps[3]] {
        assert_eq!(step.outcome, "answered", "{step:?}");
    }
    assert!(
        steps[1].reused,
        "step 2 should reuse the connection: {:?}",
        steps[1]
    );
    assert!(
        steps[2].reused,
        "step 3 should go out on the pooled connection: {:?}",
        steps[2]
    );
    assert_eq!(steps[2].outcome, "timed out", "{:?}", steps[2]);
    assert_eq!(steps[0].new_connections, 1, "{:?}", steps[0]);
    assert_eq!(steps[3].new_connections, 1, "{:?}", steps[3]);
    let ttfb = config.two_phase().ttfb;
    let limit = (ttfb + margin(&config)).as_secs_f64() * 1000.0;
    assert!(
        steps[2].lab_ms >= ttfb.as_secs_f64() * 1000.0 && steps[2].lab_ms <= limit,
        "step 3 took {} ms; TTFB {ttfb:?}, limit {limit} ms",
        steps[2].lab_ms
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_request_timer_the_reused_connection_hangs() {
    let config = config();
    for policy in [Policy::NoTimeout, Policy::ConnectArmed] {
        let steps = check(policy, &config).await.expect("the check runs");
        assert_eq!(steps[0].outcome, "answered", "{policy:?}");
        assert_eq!(steps[1].outcome, "answered", "{policy:?}");
        assert!(steps[1].reused, "{policy:?}");
        assert_eq!(
            steps[2].outcome, "still waiting at the bound",
            "{policy:?}: {:?}",
            steps[2]
        );
        assert!(steps[2].reused, "{policy:?}");
        assert_eq!(steps[3].outcome, "answered", "{policy:?}");
        // The abandoned request took its connection with it: step 4 connects anew.
        assert_eq!(steps[3].new_connections, 1, "{policy:?}: {:?}", steps[3]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_answers_once_and_leaves_nothing_in_flight() {
    let config = config();
    for (shape, client_leaves) in [
        (Shape::Normal, false),
        (Shape::Silent, false),
        (Shape::StallsBody, false),
        (Shape::Silent, true),
    ] {
        let seen = proxy::case(shape, client_leaves, &config)
            .await
            .expect("the case runs");
        assert_eq!(seen.in_flight_after, 0, "{seen:?}");
        assert_eq!(seen.upstream_busy_after, 0, "{seen:?}");
        assert!(seen.responses <= 1, "two responses: {seen:?}");
        match (shape, client_leaves) {
            (Shape::Normal, _) => {
                assert_eq!((seen.responses, seen.status), (1, 200), "{seen:?}");
                assert!(seen.body_complete, "{seen:?}");
            }
            (Shape::Silent, false) => {
                assert_eq!((seen.responses, seen.status), (1, 504), "{seen:?}");
            }
            (Shape::StallsBody, _) => {
                assert_eq!((seen.responses, seen.status), (1, 200), "{seen:?}");
                assert!(!seen.body_complete, "{seen:?}");
                assert_eq!(seen.ending, "closed", "{seen:?}");
            }
            _ => {
                assert_eq!(seen.responses, 0, "{seen:?}");
                // Released by the disconnect, long before its TTFB deadline.
                let ttfb_ms = seen.ttfb_s / config.time_scale * 1000.0;
                assert!(seen.released_ms < ttfb_ms / 2.0, "{seen:?}");
            }
        }
    }
}
