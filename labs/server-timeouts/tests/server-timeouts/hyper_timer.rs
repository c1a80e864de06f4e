//! What the server-timeouts chapter says about hyper's `header_read_timeout`
//! and its timer, shown on real sockets: without a timer the 30 s default is
//! skipped and an explicit value panics on every connection; with one, the
//! default applies.
//!
//! The facts about hyper come from its source, in the versions Cargo.lock
//! holds (hyper 1.12.0, hyper-util 0.1.21, axum 0.8.9):
//! - hyper `src/server/conn/http1.rs:253`: the builder starts with
//!   `Dur::Default(Some(30 s))`; `header_read_timeout(..)` makes it
//!   `Dur::Configured` (line 371).
//! - hyper `src/common/time.rs:73-89`, `Time::check`, called by
//!   `serve_connection` (`http1.rs:499-504`): a default with no timer logs a
//!   warning and turns the timeout off; a configured value with no timer
//!   panics ("timeout `header_read_timeout` set, but no timer set").
//! - hyper `src/common/time.rs:33-70`: without a timer hyper has no way to
//!   sleep at all, so nothing else can close the connection later either.
//! - axum `src/serve/mod.rs:389-396`: `axum::serve` builds hyper-util's
//!   `auto::Builder::new(TokioExecutor::new())` per connection and never calls
//!   `.timer(..)`.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, Once},
    task::{Context, Poll},
    time::{Duration, Instant},
};

use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    service::TowerToHyperService,
};
use lab_kit::server::spawn_axum;
use lab_server_timeouts::{
    servers::app,
    stalled_client::{ConnectionEnd, RawConnection, get_request},
};
use tokio::{net::TcpListener, task::JoinHandle};

/// Long enough for a loaded 2-core machine to connect and answer, short
/// enough to keep each test to a few seconds.
const PATIENCE: Duration = Duration::from_secs(5);

/// The message hyper panics with (`src/common/time.rs:84`).
const NO_TIMER_PANIC: &str = "timeout `header_read_timeout` set, but no timer set";

/// Keeps the panics these tests cause on purpose out of the test output;
/// any other panic is printed as usual.
fn quiet_expected_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or_default();
            if !message.contains(NO_TIMER_PANIC) {
                default_hook(info);
            }
        }));
    });
}

/// How one connection is served.
type ServeOne = Arc<
    dyn Fn(TokioIo<tokio::net::TcpStream>) -> Pin<Box<dyn Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

/// A loopback server that serves every connection with `serve_one` in its own
/// task, and keeps the tasks' handles so a test can see how they ended.
struct Server {
    addr: std::net::SocketAddr,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.accept.abort();
        for connection in self.connections.lock().expect("not poisoned").iter() {
            connection.abort();
        }
    }
}

async fn serve(serve_one: ServeOne) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binding");
    let addr = listener.local_addr().expect("the bound address");
    let connections = Arc::new(Mutex::new(Vec::new()));
    let accept = tokio::spawn({
        let connections = connections.clone();
        async move {
            while let Ok((stream, _)) = listener.accept().await {
                let task = tokio::spawn(serve_one(TokioIo::new(stream)));
                connections.lock().expect("not poisoned").push(task);
            }
        }
    });
    Server {
        addr,
        connections,
        accept,
    }
}

/// An axum app as the service hyper calls.
fn hyper_service() -> TowerToHyperService<axum::Router> {
    TowerToHyperService::new(app())
}

/// hyper's own HTTP/1 builder, as `configure` leaves it.
fn hyper_http1(configure: fn(&mut hyper::server::conn::http1::Builder)) -> ServeOne {
    Arc::new(move |io| {
        let mut builder = hyper::server::conn::http1::Builder::new();
        configure(&mut builder);
        Box::pin(async move {
            let _ = builder.serve_connection(io, hyper_service()).await;
        })
    })
}

/// hyper-util's auto builder, the one `axum::serve` uses, as `configure`
/// leaves it.
fn hyper_util_auto(
    configure: fn(&mut hyper_util::server::conn::auto::Builder<TokioExecutor>),
) -> ServeOne {
    Arc::new(move |io| {
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        configure(&mut builder);
        Box::pin(async move {
            let _ = builder.serve_connection(io, hyper_service()).await;
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_header_read_timeout_without_a_timer_kills_every_connection() {
    quiet_expected_panics();
    let servers = [
        (
            "hyper http1::Builder",
            serve(hyper_http1(|builder| {
                builder.header_read_timeout(Duration::from_secs(5));
            }))
            .await,
        ),
        (
            "hyper-util auto::Builder",
            serve(hyper_util_auto(|builder| {
                builder.http1().header_read_timeout(Duration::from_secs(5));
            }))
            .await,
        ),
    ];
    for (name, server) in &servers {
        // A complete, ordinary request: the server never answers it.
        let mut connection = RawConnection::connect(server.addr, PATIENCE)
            .await
            .expect("connecting");
        connection
            .send(&get_request("/", &server.addr.to_string()))
            .await
            .expect("sending");
        let answer = tokio::time::timeout(PATIENCE, connection.read_answer())
            .await
            .unwrap_or_else(|_| panic!("{name}: neither an answer nor a closed connection"));
        match answer {
            Err(ConnectionEnd::Closed | ConnectionEnd::Reset) if connection.buffered() == 0 => {}
            other => panic!("{name}: expected a dead connection, got {other:?}"),
        }
        // The server's side: the connection's task panicked, with hyper's message.
        let task = server
            .connections
            .lock()
            .expect("not poisoned")
            .pop()
            .expect("one connection accepted");
        let ended = tokio::time::timeout(PATIENCE, task)
            .await
            .expect("the connection's task has ended");
        let panic = ended
            .expect_err("the connection's task panicked")
            .into_panic();
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|text| text.to_string()))
            .unwrap_or_default();
        assert!(message.contains(NO_TIMER_PANIC), "{name}: {message:?}");
    }
}

/// A hyper `Timer` whose clock runs `SPEEDUP` times faster than real time,
/// and which notes every sleep hyper asks it for (in its own, fast time).
#[derive(Clone)]
struct FastTimer {
    started: Instant,
    /// The last `now` handed to hyper: hyper computes a deadline as `now()`
    /// plus its timeout, so the deadline minus this is the timeout itself,
    /// however long the thread was preempted in between.
    last_now: Arc<Mutex<Instant>>,
    requested: Arc<Mutex<Vec<Duration>>>,
}

const SPEEDUP: u32 = 100;

struct FastSleep(Pin<Box<tokio::time::Sleep>>);

impl Future for FastSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(context)
    }
}

impl hyper::rt::Sleep for FastSleep {}

impl hyper::rt::Timer for FastTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.requested.lock().expect("not poisoned").push(duration);
        Box::pin(FastSleep(Box::pin(tokio::time::sleep(duration / SPEEDUP))))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        let asked_at = *self.last_now.lock().expect("not poisoned");
        self.requested
            .lock()
            .expect("not poisoned")
            .push(deadline.saturating_duration_since(asked_at));
        let remaining = deadline.saturating_duration_since(self.now());
        Box::pin(FastSleep(Box::pin(tokio::time::sleep(remaining / SPEEDUP))))
    }

    fn now(&self) -> Instant {
        let now = self.started + self.started.elapsed() * SPEEDUP;
        *self.last_now.lock().expect("not poisoned") = now;
        now
    }
}

/// Sends half a request head (the blank line never comes) and waits up to
/// `window` for the server to close; `Some(after)` if it did.
async fn half_header_closed_within(
    addr: std::net::SocketAddr,
    window: Duration,
) -> Option<Duration> {
    let mut connection = RawConnection::connect(addr, PATIENCE)
        .await
        .expect("connecting");
    connection
        .send(format!("GET / HTTP/1.1\r\nHost: {addr}\r\n").as_bytes())
        .await
        .expect("sending half a head");
    let started = Instant::now();
    match tokio::time::timeout(window, connection.fill()).await {
        Err(_) => None,
        Ok(Err(ConnectionEnd::Closed | ConnectionEnd::Reset)) => Some(started.elapsed()),
        Ok(other) => panic!("unexpected activity on a half-sent request: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hyper_applies_its_30_s_default_only_with_a_timer() {
    let requested = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let fast_timer = FastTimer {
        started,
        last_now: Arc::new(Mutex::new(started)),
        requested: requested.clone(),
    };
    let timed = serve(Arc::new(move |io| {
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder.timer(fast_timer.clone());
        Box::pin(async move {
            let _ = builder.serve_connection(io, hyper_service()).await;
        })
    }))
    .await;
    let untimed = serve(hyper_http1(|_defaults| {})).await;
    let stock_axum = spawn_axum(app()).await.expect("starting axum::serve");

    // 30 s of hyper's default are 0.3 s on the fast timer; the window is
    // 3 s of real time (300 s on the fast clock) for all three.
    let window = Duration::from_secs(3);
    let (timed_closed, untimed_closed, axum_closed) = tokio::join!(
        half_header_closed_within(timed.addr, window),
        half_header_closed_within(untimed.addr, window),
        half_header_closed_within(stock_axum.addr, window),
    );

    // With a timer and nothing configured, hyper asked for a 30 s sleep and
    // closed the connection when it ended.
    let asked = requested.lock().expect("not poisoned").clone();
    let first = *asked.first().expect("hyper used the timer");
    assert_eq!(first, Duration::from_secs(30), "hyper asked for {asked:?}");
    let closed_after = timed_closed.expect("hyper with a timer closed the half-sent request");
    assert!(
        closed_after >= Duration::from_secs(30) / SPEEDUP / 2,
        "closed after {closed_after:?}, before the 30 s on the fast clock"
    );
    // Without a timer the same builder has no clock to close it with, and
    // axum::serve has no timer.
    assert_eq!(untimed_closed, None, "hyper without a timer");
    assert_eq!(axum_closed, None, "axum::serve");
}
