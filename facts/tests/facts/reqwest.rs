//! reqwest's defaults (`reqwest::Client::new()`), on real sockets. Read in
//! reqwest's source at the pinned version: `async_impl/client.rs` starts the
//! config with no `connect_timeout`, no `timeout`, no `read_timeout`,
//! `pool_max_idle_per_host` `usize::MAX`, `pool_idle_timeout` 90 s, TCP
//! keepalive 15 s / 15 s / 3 probes, `tcp_user_timeout` 30 s and
//! `TCP_NODELAY`; `connect.rs` wraps the whole connector (resolution
//! included) in the `connect_timeout`; the default resolver is hyper-util's
//! `GaiResolver` (`getaddrinfo` in `spawn_blocking`).

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{Router, routing::get};
use lab_facts::{PATIENCE, SilentListener, bounded, tcp_options_toward};
use lab_kit::{
    gauge::Gauge,
    net::{bind_loopback, spawn_accept_loop},
    server::{RunningServer, spawn_axum},
};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

const BOUND: Duration = Duration::from_secs(20);

async fn hello_server() -> RunningServer {
    spawn_axum(Router::new().route("/", get(|| async { "hello" })))
        .await
        .expect("the server starts")
}

#[tokio::test]
async fn a_default_client_sets_no_timeout() {
    bounded("default client, silent server", BOUND, async {
        // A server that reads the request and never answers.
        let listener = bind_loopback().await.expect("binding");
        let addr = listener.local_addr().expect("address");
        let _server = spawn_accept_loop(listener, |mut stream, _| async move {
            let mut buffer = [0u8; 1024];
            while let Ok(read) = tokio::io::AsyncReadExt::read(&mut stream, &mut buffer).await {
                if read == 0 {
                    break;
                }
            }
        });
        let client = reqwest::Client::new();
        let request = client.get(format!("http://{addr}/")).send();
        // No connect, read or total timeout ends it: still waiting at 3 s.
        let outcome = tokio::time::timeout(Duration::from_secs(3), request).await;
        assert!(outcome.is_err(), "the request ended: {outcome:?}");
    })
    .await;
}

/// A resolver that answers `addr` after `delay`, counting its lookups.
struct SlowResolver {
    addr: SocketAddr,
    delay: Duration,
    lookups: Arc<AtomicUsize>,
}

impl Resolve for SlowResolver {
    fn resolve(&self, _name: Name) -> Resolving {
        let (addr, delay) = (self.addr, self.delay);
        self.lookups.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            let addrs: Addrs = Box::new(std::iter::once(addr));
            Ok(addrs)
        })
    }
}

#[tokio::test]
async fn connect_timeout_covers_dns_resolution() {
    bounded("connect_timeout and a slow lookup", BOUND, async {
        let server = hello_server().await;
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(300))
            .dns_resolver(Arc::new(SlowResolver {
                addr: server.addr,
                delay: Duration::from_secs(10),
                lookups: Arc::default(),
            }))
            .build()
            .expect("a client");
        let started = Instant::now();
        let error = client
            .get(format!("http://facts.invalid:{}/", server.addr.port()))
            .send()
            .await
            .expect_err("the lookup outlasts the connect timeout");
        let took = started.elapsed();
        assert!(error.is_connect() && error.is_timeout(), "{error:?}");
        assert!(took < Duration::from_secs(3), "gave up after {took:?}");
        assert_eq!(server.stats.accepted(), 0, "no connection was made");
    })
    .await;
}

#[tokio::test]
async fn sockets_get_keepalive_15_s_and_a_30_s_user_timeout() {
    bounded("reqwest socket options", BOUND, async {
        let server = hello_server().await;
        let client = reqwest::Client::new();
        client
            .get(server.url("/"))
            .send()
            .await
            .expect("an answer")
            .text()
            .await
            .expect("the body");
        let options = tcp_options_toward(server.addr).expect("the client's socket");
        assert!(options.keepalive, "{options:?}");
        assert_eq!(options.keepalive_idle_s, 15, "{options:?}");
        assert_eq!(options.keepalive_interval_s, 15, "{options:?}");
        assert_eq!(options.keepalive_probes, 3, "{options:?}");
        assert_eq!(options.user_timeout_ms, 30_000, "{options:?}");
        assert!(options.nodelay, "{options:?}");
    })
    .await;
}

#[tokio::test]
async fn no_cap_on_connections_and_every_idle_one_kept() {
    bounded("connections per host", BOUND, async {
        // Each handler holds its connection until all forty are inside (or
        // 3 s pass), so no connection is free for reuse during a burst.
        let inside = Gauge::new();
        let gauge = inside.clone();
        let server = spawn_axum(Router::new().route(
            "/",
            get(move || {
                let held = gauge.enter();
                let all_in = gauge.clone();
                async move {
                    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
                    while all_in.now() < 40 && tokio::time::Instant::now() < deadline {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    drop(held);
                }
            }),
        ))
        .await
        .expect("the server starts");
        let client = reqwest::Client::new();
        let burst = || {
            let calls: Vec<_> = (0..40)
                .map(|_| {
                    let request = client.get(server.url("/")).timeout(PATIENCE).send();
                    tokio::spawn(request)
                })
                .collect();
            async move {
                for call in calls {
                    call.await.expect("the task").expect("an answer");
                }
            }
        };
        burst().await;
        // One connection per request in flight: reqwest has no cap per host.
        assert_eq!(inside.peak(), 40);
        assert_eq!(server.stats.accepted(), 40);
        tokio::time::sleep(Duration::from_millis(300)).await;
        // All forty stay in the pool (pool_max_idle_per_host: usize::MAX)...
        assert_eq!(server.stats.open(), 40);
        burst().await;
        // ...and the next burst reuses them.
        assert_eq!(server.stats.accepted(), 40);
    })
    .await;
}

#[tokio::test]
async fn a_busy_pooled_connection_is_kept_with_no_new_lookup() {
    bounded("no maximum connection age", BOUND, async {
        let server = hello_server().await;
        let lookups = Arc::new(AtomicUsize::new(0));
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(SlowResolver {
                addr: server.addr,
                delay: Duration::ZERO,
                lookups: lookups.clone(),
            }))
            .build()
            .expect("a client");
        let url = format!("http://facts.invalid:{}/", server.addr.port());
        for _ in 0..30 {
            client
                .get(&url)
                .timeout(PATIENCE)
                .send()
                .await
                .expect("an answer")
                .text()
                .await
                .expect("the body");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // One lookup and one connection for every request: the pool never
        // retires a connection by age, so no new lookup is ever made.
        assert_eq!(lookups.load(Ordering::SeqCst), 1);
        assert_eq!(server.stats.accepted(), 1);
    })
    .await;
}

#[test]
fn the_default_resolver_waits_for_the_blocking_pool() {
    // One blocking thread, which a job holds for a second: a lookup of
    // "localhost" (getaddrinfo in spawn_blocking) waits behind it, a request
    // to an address needs no lookup and does not.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(1)
        .build()
        .expect("a runtime");
    runtime.block_on(bounded("a lookup behind a busy pool", BOUND, async {
        let server = hello_server().await;
        let client = reqwest::Client::new();
        let port = server.addr.port();
        // Warm the client on the address, then fill the one blocking thread.
        client
            .get(format!("http://127.0.0.1:{port}/"))
            .send()
            .await
            .expect("an answer");
        let job = tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_secs(1)));
        tokio::time::sleep(Duration::from_millis(50)).await;
        let started = Instant::now();
        let by_address = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{port}/"))
            .send()
            .await;
        let address_took = started.elapsed();
        let by_name = reqwest::Client::new()
            .get(format!("http://localhost:{port}/"))
            .send()
            .await;
        let name_took = started.elapsed();
        assert!(
            by_address.is_ok() && by_name.is_ok(),
            "{by_address:?} {by_name:?}"
        );
        assert!(
            address_took < Duration::from_millis(500),
            "{address_took:?}"
        );
        assert!(name_took >= Duration::from_millis(800), "{name_took:?}");
        job.await.expect("the blocking job");
    }));
}

#[tokio::test]
async fn happy_eyeballs_tries_the_other_family_after_300_ms() {
    bounded("happy eyeballs", BOUND, async {
        let server = hello_server().await;
        // The same port on [::1], where the queue is full and SYNs are dropped.
        let v6 = SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, server.addr.port()));
        let silent = SilentListener::bind(v6)
            .await
            .expect("a silent listener on [::1] at the server's port");
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(TwoFamilies([silent.addr, server.addr])))
            .build()
            .expect("a client");
        let started = Instant::now();
        client
            .get(format!("http://facts.invalid:{}/", server.addr.port()))
            .timeout(PATIENCE)
            .send()
            .await
            .expect("the IPv4 address answers");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(290) && took < Duration::from_millis(1500),
            "answered after {took:?}"
        );
    })
    .await;
}

/// A resolver that answers an IPv6 address first, then an IPv4 one.
struct TwoFamilies([SocketAddr; 2]);

impl Resolve for TwoFamilies {
    fn resolve(&self, _name: Name) -> Resolving {
        let addrs = self.0;
        Box::pin(async move {
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

#[tokio::test]
async fn read_timeout_also_runs_during_the_connect() {
    bounded("read_timeout and a slow lookup", BOUND, async {
        let server = hello_server().await;
        let client = reqwest::Client::builder()
            .read_timeout(Duration::from_millis(300))
            .dns_resolver(Arc::new(SlowResolver {
                addr: server.addr,
                delay: Duration::from_secs(10),
                lookups: Arc::default(),
            }))
            .build()
            .expect("a client");
        let started = Instant::now();
        let error = client
            .get(format!("http://facts.invalid:{}/", server.addr.port()))
            .send()
            .await
            .expect_err("the read timeout fires before a connection exists");
        // The timer starts with the request, not when the connection is made.
        assert!(error.is_timeout(), "{error:?}");
        assert!(started.elapsed() < Duration::from_secs(3));
        assert_eq!(server.stats.accepted(), 0, "no connection was made");
    })
    .await;
}

/// reqwest's pool keeps an idle connection 90 s (`pool_idle_timeout`'s
/// default, which reqwest does not let a caller read): a connection idle for
/// 88 s is reused, one idle for 92 s is not. Two clients, each against its
/// own server, one request each at the start; then one asks again at 88 s
/// and the other at 92 s, and each server counts the connections it
/// accepted. hyper-util's pool discards an entry idle longer than the
/// timeout at checkout (and its timer reaps it in between), and
/// `axum::serve` never closes an idle connection itself, so only the
/// client's timeout can end one. Real time, so it runs only where
/// [`lab_kit::REAL_TIME`] is set: `cargo xtask test` sets it and runs the
/// test in the background, beside every other test, where its 92 s of
/// sleeping costs no time (`background-tests` in facts/Cargo.toml); a plain
/// `cargo test` says it skipped it.
#[tokio::test]
async fn an_idle_pooled_connection_is_kept_90_s() {
    if std::env::var_os(lab_kit::REAL_TIME).is_none() {
        eprintln!(
            "skipped: waits 92 s in real time; set {}=1 to run it (cargo xtask test does, in the background)",
            lab_kit::REAL_TIME
        );
        return;
    }
    bounded("idle pooled connection", Duration::from_secs(120), async {
        let started = tokio::time::Instant::now();
        let kept = hello_server().await;
        let dropped = hello_server().await;
        let (early, late) = (reqwest::Client::new(), reqwest::Client::new());
        let ask = |client: &reqwest::Client, server: &RunningServer| {
            let request = client.get(server.url("/")).timeout(PATIENCE).send();
            async move {
                let answer = request.await.expect("an answer");
                answer.text().await.expect("the body");
            }
        };
        ask(&early, &kept).await;
        ask(&late, &dropped).await;
        tokio::time::sleep_until(started + Duration::from_secs(88)).await;
        ask(&early, &kept).await;
        assert_eq!(
            kept.stats.accepted(),
            1,
            "a connection idle for 88 s was not reused"
        );
        tokio::time::sleep_until(started + Duration::from_secs(92)).await;
        ask(&late, &dropped).await;
        assert_eq!(
            dropped.stats.accepted(),
            2,
            "a connection idle for 92 s was reused: the default is not 90 s"
        );
    })
    .await;
}
