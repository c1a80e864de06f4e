//! A reverse proxy in axum with a reqwest client inside and the two-phase
//! timeout: 504 when the upstream sends no head in time, and a response cut
//! off (the connection closed before the body is complete) when the upstream
//! body stalls. It never writes two responses for one request, and it never
//! leaves an upstream request behind: every upstream request is counted
//! while it lives, and the count must come back to zero.

use std::{
    sync::{
        Arc,
        atomic::{AtomicI64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result};
use axum::{
    Router,
    extract::{Request, State},
    http::{HeaderName, StatusCode, header},
    response::{IntoResponse, Response},
};
use http_body_util::BodyExt;
use lab_kit::{Output, net::send_raw_get, server::spawn_axum};
use serde::Serialize;
use tokio::{io::AsyncReadExt, time::Instant};

use crate::{
    Config,
    downstream::{BusyGuard, Downstream, Shape},
    millis,
    two_phase::{IdleTimeoutBody, TwoPhase, TwoPhaseError},
};

/// What the proxy handler needs.
#[derive(Clone)]
pub struct ProxyState {
    pub client: reqwest::Client,
    /// `http://127.0.0.1:PORT` of the upstream.
    pub upstream: String,
    pub two_phase: TwoPhase,
    /// Upstream requests alive right now (sent, head or body not finished).
    pub in_flight: Arc<AtomicI64>,
}

/// Headers that describe one hop, not the message; a proxy does not forward them.
fn hop_by_hop(name: &HeaderName) -> bool {
    [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::TE,
        header::TRAILER,
        header::UPGRADE,
        header::PROXY_AUTHORIZATION,
        header::PROXY_AUTHENTICATE,
        header::HOST,
        header::CONTENT_LENGTH,
    ]
    .contains(name)
        || name.as_str() == "keep-alive"
}

/// The proxy as an axum app: every path goes to the upstream.
pub fn app(state: ProxyState) -> Router {
    Router::new().fallback(forward).with_state(state)
}

// ANCHOR: proxy
async fn forward(State(state): State<ProxyState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |path| path.as_str());
    let Ok(body) = axum::body::to_bytes(body, 1024 * 1024).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "request body over 1 MiB\n").into_response();
    };
    let mut outgoing = state
        .client
        .request(parts.method, format!("{}{path}", state.upstream))
        .body(body);
    for (name, value) in parts.headers.iter().filter(|(name, _)| !hop_by_hop(name)) {
        outgoing = outgoing.header(name, value);
    }
    let Ok(outgoing) = outgoing.build() else {
        return (
            StatusCode::BAD_GATEWAY,
            "cannot build the upstream request\n",
        )
            .into_response();
    };
    // Counted from here until the upstream body ends or is dropped.
    let in_flight = BusyGuard::new(&state.in_flight);
    let upstream = match state.two_phase.send(&state.client, outgoing).await {
        Ok(upstream) => upstream,
        // Phase one failed: nothing has been sent to the client yet, so it
        // gets exactly one response, a 504. Returning drops the upstream
        // request (and `in_flight`).
        Err(TwoPhaseError::Ttfb(_)) => {
            return (
                StatusCode::GATEWAY_TIMEOUT,
                "upstream sent no response head in time\n",
            )
                .into_response();
        }
        Err(_) => return (StatusCode::BAD_GATEWAY, "upstream failed\n").into_response(),
    };
    // Phase two: the head is forwarded now; from here on the only way to
    // report a failure is to end the stream early. The idle timer restarts
    // with every chunk, and the counter lives as long as the body does.
    let upstream = http::Response::<reqwest::Body>::from(upstream);
    let (upstream_parts, upstream_body) = upstream.into_parts();
    let body =
        IdleTimeoutBody::new(upstream_body, state.two_phase.body_idle).map_frame(move |frame| {
            let _alive = &in_flight;
            frame
        });
    let mut response = Response::new(axum::body::Body::new(body));
    *response.status_mut() = upstream_parts.status;
    for (name, value) in upstream_parts.headers.iter() {
        if !hop_by_hop(name) {
            response.headers_mut().append(name, value.clone());
        }
    }
    response
}
// ANCHOR_END: proxy

/// What a raw client saw from the proxy.
#[derive(Debug, Clone, Serialize)]
pub struct ProxyCase {
    pub upstream: &'static str,
    /// Status lines the client received on its connection (must be 1, or 0
    /// when the client left first).
    pub responses: usize,
    pub status: u16,
    /// Body bytes received, and whether the body was complete.
    pub body_bytes: usize,
    pub body_complete: bool,
    /// closed (the proxy ended the connection) | still open at the bound |
    /// client left.
    pub ending: &'static str,
    pub lab_ms: f64,
    pub seconds: f64,
    /// Upstream requests still alive in the proxy after the case settled,
    /// and requests the upstream was still busy with.
    pub in_flight_after: i64,
    pub upstream_busy_after: i64,
    /// How long, after the client's exchange ended, until both were zero.
    pub released_ms: f64,
    /// The TTFB deadline this proxy ran with (production seconds).
    pub ttfb_s: f64,
}

/// Sends one GET with `Connection: close` on a raw socket and reads until the
/// proxy closes, for at most `bound`; or leaves after `leave_after`.
async fn raw_get(
    addr: std::net::SocketAddr,
    bound: Duration,
    leave_after: Option<Duration>,
) -> Result<(Vec<u8>, &'static str)> {
    let mut stream = send_raw_get(addr, "/item").await?;
    if let Some(wait) = leave_after {
        tokio::time::sleep(wait).await;
        return Ok((Vec::new(), "client left"));
    }
    let mut received = Vec::new();
    let reading = stream.read_to_end(&mut received);
    match tokio::time::timeout(bound, reading).await {
        Ok(_) => Ok((received, "closed")),
        Err(_) => Ok((received, "still open at the bound")),
    }
}

/// Parses what `raw_get` received: status lines, first status, body.
fn parse(received: &[u8]) -> (usize, u16, usize, bool) {
    let responses = received
        .windows(9)
        .filter(|window| window == b"HTTP/1.1 ")
        .count();
    let text = String::from_utf8_lossy(received);
    let status = text
        .get(9..12)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let Some(head_end) = text.find("\r\n\r\n") else {
        return (responses, status, 0, false);
    };
    let head = text[..head_end].to_ascii_lowercase();
    let body = &text[head_end + 4..];
    if head.contains("transfer-encoding: chunked") {
        // Complete only with the last, empty chunk; count the payload bytes.
        let payload = body.chars().filter(|each| *each == 'x').count();
        (responses, status, payload, body.ends_with("0\r\n\r\n"))
    } else {
        let length = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|value| value.trim().parse::<usize>().ok())
            .unwrap_or(0);
        (responses, status, body.len(), body.len() == length)
    }
}

/// One upstream shape behind a fresh proxy.
pub async fn case(shape: Shape, client_leaves: bool, config: &Config) -> Result<ProxyCase> {
    let upstream = Downstream::start(shape, config.behaviour()).await?;
    let mut two_phase = config.two_phase();
    if client_leaves {
        // The client leaves long before this TTFB deadline: only the
        // disconnect itself can release the upstream request in time.
        two_phase.ttfb = config.lab(config.bound_s);
    }
    let state = ProxyState {
        client: crate::grid::client_for(crate::grid::Setting::TwoPhase, config)?,
        upstream: upstream.url(""),
        two_phase,
        in_flight: Arc::new(AtomicI64::new(0)),
    };
    let in_flight = Arc::clone(&state.in_flight);
    let proxy = spawn_axum(app(state)).await?;
    let bound = config.lab(config.bound_s);
    let leave_after = client_leaves.then(|| config.two_phase().ttfb / 4);
    let started = Instant::now();
    let (received, ending) = raw_get(proxy.addr, bound, leave_after).await?;
    let elapsed = started.elapsed();
    let exchange_ended = Instant::now();
    while (in_flight.load(Ordering::SeqCst) > 0 || upstream.busy() > 0)
        && exchange_ended.elapsed() < bound
    {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let released = exchange_ended.elapsed();
    let (responses, status, body_bytes, body_complete) = parse(&received);
    let result = ProxyCase {
        upstream: if client_leaves {
            "silent, client leaves"
        } else {
            shape.name()
        },
        responses,
        status,
        body_bytes,
        body_complete,
        ending,
        lab_ms: millis(elapsed),
        seconds: config.production_s(elapsed),
        in_flight_after: in_flight.load(Ordering::SeqCst),
        upstream_busy_after: upstream.busy(),
        released_ms: millis(released),
        ttfb_s: config.production_s(two_phase.ttfb),
    };
    proxy.stop(Duration::from_millis(200)).await?;
    Ok(result)
}

/// The proxy cases, one after another; summaries `proxy/<case>`.
pub async fn run_proxy(config: &Config, out: &mut Output) -> Result<()> {
    let cases = [
        ("proxy/normal", Shape::Normal, false),
        ("proxy/silent", Shape::Silent, false),
        ("proxy/stalls-body", Shape::StallsBody, false),
        ("proxy/client-leaves", Shape::Silent, true),
    ];
    for (series, shape, client_leaves) in cases {
        let measured = case(shape, client_leaves, config)
            .await
            .with_context(|| format!("case {series}"))?;
        out.write_summary(series, &measured)?;
    }
    Ok(())
}
