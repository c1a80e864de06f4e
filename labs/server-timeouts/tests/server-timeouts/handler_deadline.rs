//! What the server-timeouts chapter says about a handler deadline on an axum
//! `Router`, shown on real sockets: tower's `TimeoutLayer` is refused by the
//! compiler for its error type alone; with `HandleErrorLayer` in front, or
//! tower-http's layer, the client gets a status on a connection that stays
//! usable.

use std::{
    convert::Infallible,
    marker::PhantomData,
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
use lab_kit::server::spawn_axum;
use lab_server_timeouts::stalled_client::{Answer, RawConnection, get_request};
use tower::{BoxError, Layer, Service, ServiceBuilder};

/// Long enough for a loaded 2-core machine to connect and answer, short
/// enough to keep each test to a few seconds.
const PATIENCE: Duration = Duration::from_secs(5);

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

/// Every bound of `Router::layer` but the one on the error type, held by
/// every type that meets them.
trait BoundsButTheError: Layer<Route, Service: Service<Request>> {}

impl<L> BoundsButTheError for L
where
    L: Layer<Route> + Clone + Send + Sync + 'static,
    L::Service: Service<Request> + Clone + Send + Sync + 'static,
    <L::Service as Service<Request>>::Response: IntoResponse + 'static,
    <L::Service as Service<Request>>::Future: Send + 'static,
{
}

/// All of them: the one on the error type too.
impl<L> RouterLayer<L>
where
    L: BoundsButTheError,
    <L::Service as Service<Request>>::Error: Into<Infallible> + 'static,
{
    fn accepted_by_router(&self) -> bool {
        true
    }
}

/// The same bounds without the one on the error type.
struct EveryBoundButTheError<L>(PhantomData<L>);

impl<L> RefusedByRouter for EveryBoundButTheError<L> {}

impl<L: BoundsButTheError> EveryBoundButTheError<L> {
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

/// GET `path` on `connection`, and its answer within the patience; `which`
/// names the connection in the messages (empty for a fresh one).
async fn ask(connection: &mut RawConnection, host: &str, path: &str, which: &str) -> Answer {
    connection
        .send(&get_request(path, host))
        .await
        .unwrap_or_else(|error| panic!("sending {path}{which}: {error:?}"));
    tokio::time::timeout(PATIENCE, connection.read_answer())
        .await
        .unwrap_or_else(|elapsed| panic!("an answer to {path} within the patience: {elapsed:?}"))
        .unwrap_or_else(|error| panic!("a complete response to {path}{which}: {error:?}"))
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
    let slow = ask(&mut connection, &host, "/slow", "").await;
    let waited = started.elapsed();
    let quick = ask(&mut connection, &host, "/", " on the same connection").await;
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
