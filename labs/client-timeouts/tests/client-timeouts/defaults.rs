//! The defaults the chapter's table states, held to the versions in
//! Cargo.lock: if an upgrade changes one, this fails and the page must change.

use lab_client_timeouts::{Config, defaults::run_defaults};
use lab_kit::{Lab, Mode, Output, Value, record::Point};

fn field<'a>(point: &'a Point, name: &str) -> &'a Value {
    point
        .values
        .get(name)
        .unwrap_or_else(|| panic!("{} has no {name}", point.series))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_defaults_are_what_the_chapter_says() -> anyhow::Result<()> {
    let config = Config::for_mode(Mode::Quick);
    let out = Output::collect_part(&config, run_defaults).await?;
    let summary = |series: &str| out.summary(series).expect(series).clone();

    let reqwest = summary("defaults/reqwest");
    let legacy = summary("defaults/hyper-util-legacy");
    for point in [&reqwest, &legacy] {
        // No connect timeout and no read timeout: still waiting at the bound.
        for shape in ["no_handshake", "silent"] {
            let Value::Text(outcome) = field(point, shape) else {
                panic!("{shape} is text")
            };
            assert!(outcome.starts_with("still waiting"), "{point:?}");
        }
        assert_eq!(field(point, "idle_still_open"), &Value::Bool(true));
        assert_eq!(field(point, "so_keepalive"), &Value::Bool(true));
    }
    // reqwest 0.13 sets TCP keepalive 15 s / 15 s / 3 probes, a 30 s
    // TCP_USER_TIMEOUT, and TCP_NODELAY.
    assert_eq!(field(&reqwest, "keepalive_idle_s"), &Value::Int(15));
    assert_eq!(field(&reqwest, "keepalive_interval_s"), &Value::Int(15));
    assert_eq!(field(&reqwest, "keepalive_probes"), &Value::Int(3));
    assert_eq!(field(&reqwest, "user_timeout_ms"), &Value::Int(30_000));
    assert_eq!(field(&reqwest, "nodelay"), &Value::Bool(true));
    // hyper-util's `build_http` turns TCP keepalive on with the pool's idle
    // timeout (90 s) as its idle time, and sets nothing else.
    assert_eq!(field(&legacy, "keepalive_idle_s"), &Value::Int(90));
    assert_eq!(field(&legacy, "user_timeout_ms"), &Value::Int(0));
    assert_eq!(field(&legacy, "nodelay"), &Value::Bool(false));

    // The pool's idle timeout closes idle connections only with a timer.
    assert_eq!(
        field(&summary("reaper/reqwest"), "closed"),
        &Value::Bool(true)
    );
    assert_eq!(
        field(&summary("reaper/hyper-util-legacy-timer"), "closed"),
        &Value::Bool(true)
    );
    assert_eq!(
        field(&summary("reaper/hyper-util-legacy-no-timer"), "closed"),
        &Value::Bool(false)
    );
    for series in ["reaper/reqwest", "reaper/hyper-util-legacy-timer"] {
        let point = summary(series);
        let closed = point.number("closed_after_ms").expect("a number");
        let timeout = point.number("pool_idle_timeout_ms").expect("a number");
        assert!(
            closed >= timeout,
            "{series} closed before its timeout: {point:?}"
        );
    }
    Ok(())
}
