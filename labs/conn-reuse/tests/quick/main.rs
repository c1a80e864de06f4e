//! The connection-reuse lab in quick mode: each client setup opens the number
//! of connections its chapter says it does; over TLS each new connection pays
//! a handshake (`quick/tls.rs`); a client per request fills the ports
//! (`quick/ports.rs`).

use lab_conn_reuse::Config;
use lab_kit::{Lab, Mode, record::Point};

mod ports;
mod tls;

/// The two tests run one at a time: connection counts are measured, and a
/// second lab run beside the first would change them.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn count(point: &Point, field: &str) -> u64 {
    point
        .number(field)
        .unwrap_or_else(|error| panic!("{error:#}")) as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_run_shows_reuse_and_its_absence() -> anyhow::Result<()> {
    let _alone = ONE_AT_A_TIME.lock().await;
    let config = Config::for_mode(Mode::Quick);
    let out = lab_kit::lab::quick_run(&config).await?;
    let requests = config.requests as u64;
    let in_flight = config.in_flight as u64;
    let summary = |series: &str| {
        out.summary(series)
            .unwrap_or_else(|| panic!("no summary for {series}"))
            .clone()
    };

    // No pool to reuse: one connection per request.
    assert_eq!(
        count(&summary("client-per-request"), "connections"),
        requests
    );
    assert_eq!(count(&summary("no-idle-pool"), "connections"), requests);
    // A body dropped unread cannot go back to the pool.
    let unread = summary("unread-body");
    assert_eq!(count(&unread, "connections"), requests);
    // ...and those connections end with a reset, not a FIN (the kernel counter
    // is machine-wide, so only a lower bound is safe to assert).
    assert!(count(&unread, "resets_sent") >= requests / 2, "{unread:?}");
    // HTTP/2 multiplexes every request over one connection, nearly always:
    // the pool's checkout-or-connect race can leave a second one (about 1 run
    // in 100; see examples/h2_second_connection.rs), never dozens.
    let http2 = count(&summary("http2"), "connections");
    assert!((1..=3).contains(&http2), "http2 opened {http2} connections");

    // A shared pool reuses connections. It does not stay at `in_flight`:
    // hyper-util races a new connection against the pool and keeps the loser
    // (see the chapter), so the bound asserted is reuse, not a cap.
    let shared = count(&summary("shared-pool"), "connections");
    assert!(shared >= 1, "shared-pool accepted no connection");
    assert!(
        shared <= requests / 2,
        "shared-pool opened {shared} connections for {requests} requests"
    );
    // Everyone who closes first keeps the TIME_WAIT: the client, here.
    let per_request = summary("client-per-request");
    assert!(
        count(&per_request, "time_wait") >= requests * 9 / 10,
        "{per_request:?}"
    );
    assert_eq!(
        count(&per_request, "server_time_wait"),
        0,
        "{per_request:?}"
    );

    // The sweep: more in flight never needs fewer connections at the extremes.
    let sweep: Vec<(u64, u64)> = out
        .samples("sweep-shared-pool")
        .map(|point| (count(point, "in_flight"), count(point, "connections")))
        .collect();
    assert_eq!(sweep.len(), config.sweep.len());
    let (first, last) = (sweep[0], sweep[sweep.len() - 1]);
    // One request at a time: the pool hands back the same connection or, when
    // the race above is lost, one of very few.
    assert!(first.0 == 1 && first.1 <= 3, "{first:?}");
    assert!(last.1 >= last.0.min(in_flight), "{last:?}");

    tls::handshakes_follow_the_connections(&out, config.tls_requests as u64);
    ports::time_wait_and_the_ceiling(&out, requests);
    ports::a_narrow_window_runs_out(&out, u64::from(config.port_window));
    Ok(())
}

/// `--set` from the command line, as a reader types it: the setting reaches
/// the run and its meta record; an unknown key or a bad value is one line on
/// stderr and exit 2, before anything runs.
#[test]
fn the_command_line_changes_one_setting_or_refuses_in_one_line() {
    let _alone = ONE_AT_A_TIME.blocking_lock();
    let lab = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_lab-conn-reuse"))
            .args(args)
            .output()
            .expect("the lab binary runs")
    };
    let printed = lab(&["--settings", "--set", "in_flight=5", "--set", "sweep=1,5"]);
    assert!(printed.status.success(), "{printed:?}");
    let stdout = String::from_utf8_lossy(&printed.stdout);
    assert!(stdout.lines().any(|line| line == "in_flight=5"), "{stdout}");
    assert!(stdout.lines().any(|line| line == "sweep=1,5"), "{stdout}");
    assert!(
        stdout.lines().any(|line| line == "requests=500"),
        "{stdout}"
    );

    for bad in [
        ["--set", "bogus=1"],
        ["--set", "in_flight=none"],
        ["--set", "in_flight=-1"],
    ] {
        let refused = lab(&bad);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{bad:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{bad:?}: {stderr}");
        assert!(
            stderr.contains(&format!("--set {}", bad[1].split('=').next().unwrap())),
            "{stderr}"
        );
        assert!(refused.stdout.is_empty(), "{bad:?}: nothing runs");
    }

    // A real (small) run: the meta record says what was set.
    let run = lab(&[
        "--set",
        "requests=20",
        "--set",
        "in_flight=2",
        "--set",
        "sweep=1",
    ]);
    assert!(run.status.success(), "{run:?}");
    let meta = String::from_utf8_lossy(&run.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(
        meta.contains(r#""set":["requests=20","in_flight=2","sweep=1"]"#),
        "{meta}"
    );
    assert!(meta.contains(r#""requests":20"#), "{meta}");
}
