//! What the server-timeouts chapter says about the stack, shown on real
//! sockets: a handler deadline on an axum `Router` (tower's layer is refused
//! by the compiler; with `HandleErrorLayer` or tower-http's layer the client
//! gets a status on a connection that stays usable), and hyper's
//! `header_read_timeout` without a timer (the 30 s default is skipped, an
//! explicit value panics on every connection).
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
    convert::Infallible,
    future::Future,
    marker::PhantomData,
    pin::Pin,
    sync::{Arc, Mutex, Once},
    task::{Context, Poll},
    time::{Duration, Instant},
};

use axum::{
    Router,
    error_handling::HandleErrorLayer,
    extract::Request,
    http::StatusCode,
    response::IntoResponse,
    routing::{Route, get},
};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use lab_kit::server::spawn_axum;
use lab_server_timeouts::stalled_client::{ConnectionEnd, RawConnection, get_request};
use tokio::{net::TcpListener, task::JoinHandle};
use tower::{BoxError, Layer, Service, ServiceBuilder, ServiceExt};

/// Long enough for a loaded 2-core machine to connect and answer, short
/// enough to keep each test to a few seconds.
const PATIENCE: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------
// A handler deadline on an axum Router
// ---------------------------------------------------------------------------

/// The deadline the routers below put on `/slow`.
const DEADLINE: Duration = Duration::from_millis(200);

/// `/slow` never answers on its own; `/` answers at once.
fn routes() -> Router {
    Router::new().route("/", get(|| async { "ok\n" })).route(
        "/slow",
        get(|| async {
            std::future::pending::<()>().await;
            "unreachable\n"
        }),
    )
}

/// Whether `Router::layer` accepts a layer of type `L`: the inherent method
/// exists only when every bound of `Router::layer` (axum 0.8.9,
/// `src/routing/mod.rs:303-309`) holds, and the trait method answers `false`
/// otherwise. Method resolution picks the inherent one whenever its bounds
/// hold, so this is the compiler's own verdict, read at run time.
struct RouterLayer<L>(PhantomData<L>);

trait RefusedByRouter {
    fn accepted_by_router(&self) -> bool {
        false
    }
    fn accepted_if_its_error_were_infallible(&self) -> bool {
        false
    }
}

impl<L> RefusedByRouter for RouterLayer<L> {}

impl<L> RouterLayer<L>
where
    L: Layer<Route> + Clone + Send + Sync + 'static,
    L::Service: Service<Request> + Clone + Send + Sync + 'static,
    <L::Service as Service<Request>>::Response: IntoResponse + 'static,
    <L::Service as Service<Request>>::Error: Into<Infallible> + 'static,
    <L::Service as Service<Request>>::Future: Send + 'static,
{
    fn accepted_by_router(&self) -> bool {
        true
    }
}

/// The same bounds without the one on the error type.
struct EveryBoundButTheError<L>(PhantomData<L>);

impl<L> RefusedByRouter for EveryBoundButTheError<L> {}

impl<L> EveryBoundButTheError<L>
where
    L: Layer<Route> + Clone + Send + Sync + 'static,
    L::Service: Service<Request> + Clone + Send + Sync + 'static,
    <L::Service as Service<Request>>::Response: IntoResponse + 'static,
    <L::Service as Service<Request>>::Future: Send + 'static,
{
    fn accepted_if_its_error_were_infallible(&self) -> bool {
        true
    }
}

/// The type of a value, as a `PhantomData`, so the probes above can name the
/// type of a layer that is built by a function.
fn type_of<T>(_: &T) -> PhantomData<T> {
    PhantomData
}

/// tower's own timeout, with `HandleErrorLayer` in front to turn its
/// `Elapsed` error into a status. A macro, not a function, so the probes
/// above see the layer's concrete type (an `impl Layer` would hide that its
/// service is `Clone`).
macro_rules! tower_timeout_with_error_handler {
    () => {
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(|error: BoxError| async move {
                if error.is::<tower::timeout::error::Elapsed>() {
                    StatusCode::SERVICE_UNAVAILABLE
                } else {
                    StatusCode::INTERNAL_SERVER_ERROR
                }
            }))
            .layer(tower::timeout::TimeoutLayer::new(DEADLINE))
    };
}

#[test]
fn router_refuses_towers_timeout_layer_for_its_error_type_alone() {
    // The probes can say no (a `u8` is not a layer at all) and yes (`()` is
    // tower's do-nothing layer, which leaves the router's own service).
    assert!(!RouterLayer(PhantomData::<u8>).accepted_by_router());
    assert!(!EveryBoundButTheError(PhantomData::<u8>).accepted_if_its_error_were_infallible());
    assert!(RouterLayer(PhantomData::<()>).accepted_by_router());

    let tower_alone = tower::timeout::TimeoutLayer::new(DEADLINE);
    assert!(!RouterLayer(type_of(&tower_alone)).accepted_by_router());
    // Everything else about it would do: the error type is the reason.
    assert!(EveryBoundButTheError(type_of(&tower_alone)).accepted_if_its_error_were_infallible());

    let handled = tower_timeout_with_error_handler!();
    assert!(RouterLayer(type_of(&handled)).accepted_by_router());
    let tower_http = tower_http::timeout::TimeoutLayer::with_status_code(
        StatusCode::SERVICE_UNAVAILABLE,
        DEADLINE,
    );
    assert!(RouterLayer(type_of(&tower_http)).accepted_by_router());
}

/// What a client of `app` on `axum::serve` sees: `/slow` on a fresh
/// connection, then `/` on the same one.
async fn slow_then_quick(app: Router) -> (u16, Duration, bool, u16, u64) {
    let server = spawn_axum(app).await.expect("starting axum::serve");
    let mut connection = RawConnection::connect(server.addr, PATIENCE)
        .await
        .expect("connecting");
    let host = server.addr.to_string();
    let started = Instant::now();
    connection
        .send(&get_request("/slow", &host))
        .await
        .expect("sending /slow");
    let slow = tokio::time::timeout(PATIENCE, connection.read_answer())
        .await
        .expect("an answer to /slow within the patience")
        .expect("a complete response to /slow");
    let waited = started.elapsed();
    connection
        .send(&get_request("/", &host))
        .await
        .expect("sending / on the same connection");
    let quick = tokio::time::timeout(PATIENCE, connection.read_answer())
        .await
        .expect("an answer to / within the patience")
        .expect("a complete response to / on the same connection");
    (
        slow.status,
        waited,
        slow.close,
        quick.status,
        server.stats.accepted(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_past_its_deadline_gets_a_status_and_the_connection_serves_on() {
    let with_handler = routes().layer(tower_timeout_with_error_handler!());
    let with_tower_http = routes().layer(tower_http::timeout::TimeoutLayer::with_status_code(
        StatusCode::SERVICE_UNAVAILABLE,
        DEADLINE,
    ));
    for (name, app) in [
        ("HandleErrorLayer + tower::timeout", with_handler),
        ("tower_http::timeout", with_tower_http),
    ] {
        let (slow_status, waited, close, quick_status, accepted) = slow_then_quick(app).await;
        assert_eq!(slow_status, 503, "{name}");
        assert!(waited >= DEADLINE, "{name}: answered after {waited:?}");
        assert!(!close, "{name}: the answer closed the connection");
        assert_eq!(quick_status, 200, "{name}");
        assert_eq!(accepted, 1, "{name}: both requests on one connection");
    }
}

// ---------------------------------------------------------------------------
// hyper's header read timeout and its timer
// ---------------------------------------------------------------------------

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
fn hyper_service() -> impl hyper::service::Service<
    hyper::Request<Incoming>,
    Response = axum::response::Response,
    Error = Infallible,
    Future: Send,
> + Clone
+ Send
+ 'static {
    let router = routes();
    hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        router.clone().oneshot(request)
    })
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
    let stock_axum = spawn_axum(routes()).await.expect("starting axum::serve");

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
