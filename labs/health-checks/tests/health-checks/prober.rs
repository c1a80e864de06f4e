//! The kubelet-style prober against servers that misbehave on real sockets:
//! one that accepts and never answers (every probe times out, the prober
//! still ends on time), and a closed port (every probe is refused).

use std::time::Duration;

use lab_health_checks::kubelet::{KubeletProbe, ProbeKind, run_prober};
use lab_kit::net::{bind_loopback, closed_loopback_port, spawn_accept_loop};
use tokio::time::Instant;

fn liveness() -> KubeletProbe {
    KubeletProbe {
        kind: ProbeKind::Liveness,
        path: "/livez",
        period: Duration::from_millis(60),
        timeout: Duration::from_millis(20),
        failure_threshold: 3,
        success_threshold: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_fails_every_probe_and_the_prober_ends() {
    let listener = bind_loopback().await.expect("a loopback listener");
    let addr = listener.local_addr().expect("an address");
    // Accepts, reads nothing, answers nothing, until dropped.
    let _silent = spawn_accept_loop(listener, |stream, _peer| async move {
        let _held_open = stream;
        std::future::pending::<()>().await
    });
    let start = Instant::now();
    let until = start + Duration::from_millis(400);
    let log = run_prober(liveness(), format!("http://{addr}"), start, until)
        .await
        .expect("the prober runs");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "the prober ran {:?}",
        start.elapsed()
    );
    assert!(log.attempts.len() >= 3, "{} probes", log.attempts.len());
    assert!(log.attempts.iter().all(|attempt| !attempt.passed));
    // Each failed on its timeout, not later (20 ms, with room for a busy machine).
    for attempt in &log.attempts {
        let took = attempt.end_ms - attempt.start_ms;
        assert!((15.0..300.0).contains(&took), "a probe took {took} ms");
    }
    assert_eq!(log.restarts_ms.len(), log.attempts.len() / 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_fails_every_probe() {
    let closed = closed_loopback_port().expect("a closed port");
    let port = closed.port();
    let start = Instant::now();
    let until = start + Duration::from_millis(200);
    let log = run_prober(liveness(), format!("http://127.0.0.1:{port}"), start, until)
        .await
        .expect("the prober runs");
    assert!(!log.attempts.is_empty());
    assert!(log.attempts.iter().all(|attempt| !attempt.passed));
}
