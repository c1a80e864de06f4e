//! The proxy part: a slow upload holds `axum::serve`'s handler for as long
//! as the client takes, directly and through nginx with
//! `proxy_request_buffering off`; with it on, nginx reads the whole body
//! first and the handler gets head and body together. Where nginx is not
//! installed the direct path alone is checked, with one line saying so.

use lab_kit::{Lab, Mode};
use lab_server_timeouts::{
    Config,
    buffering::{BodyPath, HeldHandler, buffering},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buffering_proxy_spares_the_backend_a_slow_body() {
    let config = Config::for_mode(Mode::Quick);
    let rows = buffering(&config).await.expect("the proxy part runs");
    let row = |path: BodyPath| -> Option<&HeldHandler> {
        rows.iter()
            .find(|(which, _)| *which == path)
            .map(|(_, row)| row)
    };
    let direct = row(BodyPath::Direct).expect("the direct path always runs");
    // Direct: the handler begins with the head and waits out the body.
    assert_eq!(direct.status, 200);
    assert!(
        direct.head_at_ms < direct.body_sent_over_ms / 4.0,
        "{direct:?}"
    );
    assert!(
        direct.held_ms > direct.body_sent_over_ms / 2.0,
        "{direct:?}"
    );
    if lab_kit::nginx::find("nginx").is_none() {
        eprintln!("skipped the nginx paths: nginx not installed");
        assert_eq!(rows.len(), 1);
        return;
    }
    let on = row(BodyPath::BufferingOn).expect("nginx, buffering on");
    let off = row(BodyPath::BufferingOff).expect("nginx, buffering off");
    assert_ne!(on.nginx_version, "unknown");
    for row in [on, off] {
        assert_eq!(row.status, 200, "{row:?}");
    }
    // On: nginx forwards nothing until it has the whole body, and the
    // handler gets it at once.
    assert!(on.head_at_ms > on.body_sent_over_ms * 0.8, "{on:?}");
    assert!(on.held_ms < on.body_sent_over_ms / 10.0, "{on:?}");
    // Off: the head goes on at once and the handler waits, as direct.
    assert!(off.head_at_ms < off.body_sent_over_ms / 4.0, "{off:?}");
    assert!(off.held_ms > off.body_sent_over_ms / 2.0, "{off:?}");
}
