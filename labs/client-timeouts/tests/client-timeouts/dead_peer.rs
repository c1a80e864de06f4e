//! A frozen HTTP/2 peer whose kernel still ACKs: TCP keepalive cannot see it,
//! HTTP/2 PING keepalive can, and a pool idle timeout drops the connection
//! without seeing anything. The request after the watch shows the effect.

use lab_client_timeouts::{
    Config,
    dead_peer::{Watcher, watch_one},
};
use lab_kit::{Lab, Mode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_ping_or_the_pool_drops_a_frozen_peer() {
    let config = Config::for_mode(Mode::Quick);
    let (tcp, ping, pool, defaults) = tokio::join!(
        watch_one(Watcher::TcpKeepalive, &config),
        watch_one(Watcher::Http2Ping, &config),
        watch_one(Watcher::PoolIdle, &config),
        watch_one(Watcher::Defaults, &config),
    );
    let (tcp, ping, pool, defaults) = (
        tcp.expect("tcp keepalive runs"),
        ping.expect("ping runs"),
        pool.expect("pool idle runs"),
        defaults.expect("defaults run"),
    );
    // The peer's kernel answered the keepalive probes: the connection looked
    // alive for the whole watch, and the next request went out on it.
    assert!(!tcp.dropped, "{tcp:?}");
    assert!(tcp.segments_in >= 2, "no keepalive ACKs arrived: {tcp:?}");
    assert_eq!(tcp.next_request, "still waiting at the bound", "{tcp:?}");
    assert!(!defaults.dropped, "{defaults:?}");
    assert_eq!(defaults.next_request, "still waiting at the bound");
    // An unanswered PING closes the connection after interval + timeout.
    let ping_ms = config.lab(config.h2_ping_interval_s).as_secs_f64() * 1000.0;
    assert!(ping.dropped && ping.dropped_after_ms >= ping_ms, "{ping:?}");
    assert_eq!(ping.next_request, "answered", "{ping:?}");
    // The pool drops the idle connection around its idle timeout, dead or
    // not. (For HTTP/2 it can come a little before the timeout counted from
    // the last response: the chapter says so; here only "well within the
    // watch" is asserted.)
    assert!(
        pool.dropped && pool.dropped_after_ms < pool.watch_ms / 2.0,
        "{pool:?}"
    );
    assert_eq!(pool.next_request, "answered", "{pool:?}");
}
