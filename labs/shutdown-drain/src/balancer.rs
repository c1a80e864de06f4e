//! A small HTTP/1.1 load balancer that routes only to backends whose
//! readiness endpoint answers 200, polled on a fixed period, as a Kubernetes
//! Service (fed by readiness probes) or an ALB target group (fed by health
//! checks) does.
//!
//! What it does, as real balancers do: a keep-alive pool toward each backend;
//! round robin over the ready ones; 502 when the backend refuses the
//! connection or closes or resets it before a whole response; 503 when no
//! backend is ready; hop-by-hop `Connection` headers are not forwarded, so a
//! backend's `Connection: close` ends the backend connection, not the
//! client's. What it does not do: retries (beyond hyper-util's resend of a
//! request that was never written), TLS, HTTP/2.
//!
//! A few headers make the lab's bookkeeping exact: on responses,
//! `x-backend` (the index that served), `x-balancer-error` (why a 502 or 503
//! came from the balancer itself), `x-upstream-reused` (that 502's request
//! went out on a pooled connection, opened before the request came) and
//! `x-upstream-close` (the backend said `Connection: close`); on requests, `x-pin-backend` routes to one backend
//! while it is ready (a sticky session).

use std::{
    collections::HashMap,
    convert::Infallible,
    future::Future,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    task::{Context as TaskContext, Poll},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty, Full, combinators::BoxBody};
use hyper::{body::Incoming, service::service_fn};
use hyper_util::{
    client::legacy::{
        Client,
        connect::{HttpConnector, HttpInfo},
    },
    rt::{TokioExecutor, TokioIo},
};
use tokio::{
    net::{TcpListener, TcpStream},
    task::JoinSet,
};

use lab_kit::{clock::monotonic_ms, net::bind_loopback};

/// Request header: route to this backend index, if it is ready.
pub const PIN_HEADER: &str = "x-pin-backend";
/// Response header: the backend index that answered.
pub const BACKEND_HEADER: &str = "x-backend";
/// Response header: the backend's response said `Connection: close`.
pub const UPSTREAM_CLOSE_HEADER: &str = "x-upstream-close";
/// Response header on a 502: the request went out on a connection the pool
/// reused (opened before the request arrived), not on a new one.
pub const UPSTREAM_REUSED_HEADER: &str = "x-upstream-reused";
/// Response header on the balancer's own 502 and 503: `refused`, `reset`,
/// `no-backend`.
pub const ERROR_HEADER: &str = "x-balancer-error";

/// How the balancer watches its backends.
#[derive(Debug, Clone, Copy)]
pub struct ReadinessBalancerConfig {
    /// Time between two readiness polls of one backend (Kubernetes
    /// `periodSeconds`, ALB `HealthCheckIntervalSeconds`).
    pub poll_period: Duration,
    /// A poll that takes longer counts as a failure (`timeoutSeconds`).
    pub poll_timeout: Duration,
    /// Consecutive failed polls before a backend is taken out
    /// (`failureThreshold`).
    pub failure_threshold: u32,
    /// The readiness path.
    pub ready_path: &'static str,
}

/// A change of a backend's readiness, as the balancer saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transition {
    pub backend: usize,
    /// CLOCK_MONOTONIC ms ([`monotonic_ms`]).
    pub t_ms: f64,
    pub ready: bool,
}

struct Backend {
    addr: SocketAddr,
    ready: AtomicBool,
}

struct Shared {
    backends: Vec<Backend>,
    next: AtomicUsize,
    client: Client<NotingConnector, Incoming>,
    /// When each upstream connection was opened, by its local address
    /// (CLOCK_MONOTONIC ms), so a failed request can tell a pooled
    /// connection from a new one.
    opened: OpenedAt,
    transitions: Mutex<Vec<Transition>>,
}

type OpenedAt = Arc<Mutex<HashMap<SocketAddr, f64>>>;

/// hyper-util's `HttpConnector`, noting when each connection opened. A local
/// address names one connection at a time: a port the kernel hands out again
/// overwrites the entry of the connection that had it.
#[derive(Clone)]
struct NotingConnector {
    inner: HttpConnector,
    opened: OpenedAt,
}

impl tower_service::Service<http::Uri> for NotingConnector {
    type Response = TokioIo<TcpStream>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let opened = Arc::clone(&self.opened);
        Box::pin(async move {
            let stream = connecting.await?;
            if let Ok(local) = stream.inner().local_addr() {
                opened
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .insert(local, monotonic_ms());
            }
            Ok(stream)
        })
    }
}

fn pooling_client(opened: &OpenedAt) -> Client<NotingConnector, Incoming> {
    let connector = NotingConnector {
        inner: HttpConnector::new(),
        opened: Arc::clone(opened),
    };
    Client::builder(TokioExecutor::new()).build(connector)
}

type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// A running balancer. Dropping it stops the pollers, the listener and every
/// connection it holds.
pub struct ReadinessBalancer {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    _tasks: JoinSet<()>,
}

impl ReadinessBalancer {
    /// Listens on 127.0.0.1 (port 0) in front of `backends`, all taken as not
    /// ready until their first successful poll.
    pub async fn start(
        backends: &[SocketAddr],
        config: ReadinessBalancerConfig,
    ) -> Result<ReadinessBalancer> {
        if backends.is_empty() {
            bail!("a balancer needs at least one backend");
        }
        let listener = bind_loopback().await.context("binding the balancer")?;
        let addr = listener
            .local_addr()
            .context("reading the balancer's address")?;
        let opened = OpenedAt::default();
        let shared = Arc::new(Shared {
            backends: backends
                .iter()
                .map(|&addr| Backend {
                    addr,
                    ready: AtomicBool::new(false),
                })
                .collect(),
            next: AtomicUsize::new(0),
            // The pool toward the backends: keep-alive, as every balancer has.
            client: pooling_client(&opened),
            opened,
            transitions: Mutex::new(Vec::new()),
        });
        let mut tasks = JoinSet::new();
        for index in 0..backends.len() {
            tasks.spawn(poll_readiness(Arc::clone(&shared), index, config));
        }
        tasks.spawn(accept(listener, Arc::clone(&shared)));
        Ok(ReadinessBalancer {
            addr,
            shared,
            _tasks: tasks,
        })
    }

    /// `http://<balancer><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn is_ready(&self, backend: usize) -> bool {
        self.shared
            .backends
            .get(backend)
            .is_some_and(|entry| entry.ready.load(Ordering::SeqCst))
    }

    /// Every readiness change so far, in order.
    pub fn transitions(&self) -> Vec<Transition> {
        self.shared
            .transitions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Waits (bounded) until every backend has been seen ready.
    pub async fn wait_all_ready(&self, limit: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + limit;
        while !(0..self.shared.backends.len()).all(|index| self.is_ready(index)) {
            if tokio::time::Instant::now() >= deadline {
                bail!("the backends were not all ready within {limit:?}");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }
}

// ANCHOR: poll
/// Polls one backend's readiness forever (the task is aborted with the
/// balancer). A fresh connection per poll, as a kubelet probe makes.
async fn poll_readiness(shared: Arc<Shared>, index: usize, config: ReadinessBalancerConfig) {
    let client: Client<HttpConnector, Empty<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build_http();
    let url = format!(
        "http://{}{}",
        shared.backends[index].addr, config.ready_path
    );
    let mut failures = 0u32;
    let mut ticker = tokio::time::interval(config.poll_period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Ok(uri) = url.parse::<http::Uri>() else {
            return;
        };
        let answered = tokio::time::timeout(config.poll_timeout, client.get(uri)).await;
        let ok = matches!(&answered, Ok(Ok(response)) if response.status() == StatusCode::OK);
        failures = if ok { 0 } else { failures + 1 };
        let backend = &shared.backends[index];
        let was_ready = backend.ready.load(Ordering::SeqCst);
        // One success puts a backend in; `failure_threshold` failures in a
        // row take it out. Between polls, the balancer acts on stale news.
        let now_ready = ok || (was_ready && failures < config.failure_threshold);
        if now_ready != was_ready {
            backend.ready.store(now_ready, Ordering::SeqCst);
            shared
                .transitions
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(Transition {
                    backend: index,
                    t_ms: monotonic_ms(),
                    ready: now_ready,
                });
        }
    }
}
// ANCHOR_END: poll

async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    // Connection tasks live in this set: aborting the accept task drops the
    // set, which aborts them all.
    let mut connections = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let shared = Arc::clone(&shared);
        connections.spawn(async move {
            let service = service_fn(move |request| proxy(Arc::clone(&shared), request));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        // Reap finished connection tasks so the set does not grow.
        while connections.try_join_next().is_some() {}
    }
}

/// Which backend serves a request: the pinned one if it is ready, else the
/// next ready one in round robin; `None` if none is.
fn choose(shared: &Shared, pinned: Option<usize>) -> Option<usize> {
    let ready = |index: usize| shared.backends[index].ready.load(Ordering::SeqCst);
    if let Some(index) = pinned.filter(|&index| index < shared.backends.len()) {
        return ready(index).then_some(index);
    }
    let count = shared.backends.len();
    let start = shared.next.fetch_add(1, Ordering::SeqCst);
    (0..count)
        .map(|step| (start + step) % count)
        .find(|&index| ready(index))
}

fn own_error(status: StatusCode, reason: &'static str) -> Response<ProxyBody> {
    let mut response = Response::new(
        Full::new(Bytes::from(format!("balancer: {reason}\n")))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(ERROR_HEADER, HeaderValue::from_static(reason));
    response
}

/// Why an upstream request failed, in the balancer's words.
fn classify(error: &hyper_util::client::legacy::Error) -> &'static str {
    if error.is_connect() {
        // Nothing listens any more: the backend stopped accepting or exited.
        "refused"
    } else {
        // The connection was closed or reset before a whole response head:
        // the request was in flight (or raced a close of an idle connection).
        "reset"
    }
}

async fn proxy(
    shared: Arc<Shared>,
    mut request: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    let pinned = request
        .headers()
        .get(PIN_HEADER)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.parse().ok());
    let Some(index) = choose(&shared, pinned) else {
        return Ok(own_error(StatusCode::SERVICE_UNAVAILABLE, "no-backend"));
    };
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |path| path.as_str())
        .to_string();
    let Ok(uri) = format!("http://{}{path}", shared.backends[index].addr).parse() else {
        return Ok(own_error(StatusCode::BAD_REQUEST, "bad-uri"));
    };
    *request.uri_mut() = uri;
    request.headers_mut().remove(PIN_HEADER);
    request.headers_mut().remove(header::CONNECTION);
    let started = monotonic_ms();
    match shared.client.request(request).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            // Hop by hop: the backend closing its connection to us says
            // nothing about our connection to the client. (The lab still
            // wants to know, so it is passed on under another name.)
            let closing = parts
                .headers
                .get_all(header::CONNECTION)
                .iter()
                .any(|value| value.as_bytes().eq_ignore_ascii_case(b"close"));
            parts.headers.remove(header::CONNECTION);
            if closing {
                parts
                    .headers
                    .insert(UPSTREAM_CLOSE_HEADER, HeaderValue::from_static("1"));
            }
            parts
                .headers
                .insert(BACKEND_HEADER, HeaderValue::from(index));
            // A body that fails midway (the backend died mid-stream) makes
            // hyper abort the client connection: the client sees a reset.
            Ok(Response::from_parts(parts, body.boxed()))
        }
        Err(error) => {
            let mut response = own_error(StatusCode::BAD_GATEWAY, classify(&error));
            if opened_before(&shared.opened, &error, started) {
                response
                    .headers_mut()
                    .insert(UPSTREAM_REUSED_HEADER, HeaderValue::from_static("1"));
            }
            Ok(response)
        }
    }
}

/// The failed request went out on a connection opened before it started:
/// one the pool had kept and handed out again.
fn opened_before(
    opened: &OpenedAt,
    error: &hyper_util::client::legacy::Error,
    started: f64,
) -> bool {
    let Some(connected) = error.connect_info() else {
        // Failed before a connection was chosen (a refused connect).
        return false;
    };
    let mut extras = http::Extensions::new();
    connected.get_extras(&mut extras);
    let Some(local) = extras.get::<HttpInfo>().map(HttpInfo::local_addr) else {
        return false;
    };
    opened
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .get(&local)
        .is_some_and(|&opened_at| opened_at < started)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared_with(ready: &[bool]) -> Shared {
        Shared {
            backends: ready
                .iter()
                .map(|&flag| Backend {
                    addr: SocketAddr::from(([127, 0, 0, 1], 1)),
                    ready: AtomicBool::new(flag),
                })
                .collect(),
            next: AtomicUsize::new(0),
            client: pooling_client(&OpenedAt::default()),
            opened: OpenedAt::default(),
            transitions: Mutex::new(Vec::new()),
        }
    }

    #[tokio::test]
    async fn routes_only_to_ready_backends() {
        let shared = shared_with(&[true, false, true]);
        let picks: Vec<_> = (0..4).map(|_| choose(&shared, None)).collect();
        assert_eq!(picks, [Some(0), Some(2), Some(2), Some(0)]);
        assert_eq!(
            choose(&shared, Some(1)),
            None,
            "a pinned backend that is down"
        );
        assert_eq!(choose(&shared, Some(2)), Some(2));
        let none_ready = shared_with(&[false, false]);
        assert_eq!(choose(&none_ready, None), None);
    }
}
