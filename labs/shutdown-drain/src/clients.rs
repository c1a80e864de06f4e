//! The clients of a deploy: steady `/work` traffic through the balancer, long
//! requests and server-sent-event streams pinned to the server, and how each
//! request ended as the client saw it.

use std::time::Duration;

use lab_kit::clock::monotonic_ms;
use serde::Serialize;
use tokio::{sync::watch, task::JoinSet};

use crate::balancer::{
    BACKEND_HEADER, ERROR_HEADER, PIN_HEADER, UPSTREAM_CLOSE_HEADER, UPSTREAM_REUSED_HEADER,
};

/// How one request ended, as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The balancer answered 502: the backend refused the connection.
    Refused,
    /// Reset mid-flight: the balancer answered 502 because the backend
    /// closed or reset the connection before a whole response, or a response
    /// body (a stream) broke off.
    Reset,
    /// Another 502.
    BadGateway,
    /// 503, from the backend or from a balancer with nothing ready.
    Unavailable,
    /// Another status (500: the database was closed under the request).
    ServerError,
    /// The client gave up.
    Timeout,
    /// The request never reached the balancer.
    Error,
    /// A stream still open when the lab stopped watching.
    Open,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Refused => "refused",
            Outcome::Reset => "reset",
            Outcome::BadGateway => "502",
            Outcome::Unavailable => "503",
            Outcome::ServerError => "500",
            Outcome::Timeout => "timeout",
            Outcome::Error => "error",
            Outcome::Open => "open",
        }
    }

    /// The outcome's row on the timeline charts: 0 ok, 1 503, 2 refused,
    /// 3 reset, 4 another 502, 5 anything else. (The readiness lane is -1.)
    pub fn row(self) -> f64 {
        match self {
            Outcome::Ok | Outcome::Open => 0.0,
            Outcome::Unavailable => 1.0,
            Outcome::Refused => 2.0,
            Outcome::Reset => 3.0,
            Outcome::BadGateway => 4.0,
            Outcome::ServerError | Outcome::Timeout | Outcome::Error => 5.0,
        }
    }

    pub fn failed(self) -> bool {
        !matches!(self, Outcome::Ok | Outcome::Open)
    }
}

/// One request of a deploy. Times are CLOCK_MONOTONIC ms while the deploy
/// runs, and ms from the start of traffic once it is on a timeline.
#[derive(Debug, Clone, Serialize)]
pub struct RequestSample {
    pub kind: &'static str,
    pub start_ms: f64,
    pub end_ms: f64,
    /// Its row on the timeline chart ([`Outcome::row`]).
    pub row: f64,
    /// Which backend answered: 0 the server being deployed, 1 the peer, -1
    /// the balancer itself or nobody.
    pub backend: i64,
    pub outcome: &'static str,
    /// The server's response said `Connection: close` (passed on by the balancer).
    pub upstream_close: bool,
    /// A 502 whose request the balancer sent on a pooled connection (one
    /// opened before the request came), not on a new one.
    #[serde(skip)]
    pub on_pooled_connection: bool,
    #[serde(skip)]
    pub acknowledged_id: Option<u64>,
    #[serde(skip)]
    pub result: Outcome,
}

fn request_sample(
    kind: &'static str,
    start: f64,
    answer: Answer,
    acknowledged_id: Option<u64>,
) -> RequestSample {
    let result = answer.outcome;
    RequestSample {
        kind,
        start_ms: start,
        end_ms: monotonic_ms(),
        row: result.row(),
        backend: answer.backend,
        outcome: result.name(),
        upstream_close: answer.upstream_close,
        on_pooled_connection: answer.pooled,
        acknowledged_id: acknowledged_id.filter(|_| result == Outcome::Ok),
        result,
    }
}

/// How a request through the balancer ended.
#[derive(Debug, Clone, Copy)]
struct Answer {
    outcome: Outcome,
    /// Which backend answered (-1: the balancer itself, or nobody).
    backend: i64,
    /// The backend's response carried `Connection: close`.
    upstream_close: bool,
    /// The balancer's 502 came from a pooled upstream connection.
    pooled: bool,
}

impl Answer {
    fn without_response(outcome: Outcome) -> Answer {
        Answer {
            outcome,
            backend: -1,
            upstream_close: false,
            pooled: false,
        }
    }
}

fn backend_of(response: &reqwest::Response) -> i64 {
    response
        .headers()
        .get(BACKEND_HEADER)
        .and_then(|value| value.to_str().ok()?.parse().ok())
        .unwrap_or(-1)
}

// ANCHOR: classify
/// How a request through the balancer ended, and which backend answered.
async fn classify(sent: reqwest::Result<reqwest::Response>) -> Answer {
    let response = match sent {
        Ok(response) => response,
        Err(error) if error.is_timeout() => return Answer::without_response(Outcome::Timeout),
        Err(_) => return Answer::without_response(Outcome::Error),
    };
    let backend = backend_of(&response);
    let upstream_close = response.headers().contains_key(UPSTREAM_CLOSE_HEADER);
    let pooled = response.headers().contains_key(UPSTREAM_REUSED_HEADER);
    let balancer_said = response
        .headers()
        .get(ERROR_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let outcome = match (response.status().as_u16(), balancer_said.as_deref()) {
        (200, _) => match response.bytes().await {
            Ok(_) => Outcome::Ok,
            // The head arrived, the body broke off: reset mid-flight.
            Err(_) => Outcome::Reset,
        },
        (502, Some("refused")) => Outcome::Refused,
        (502, Some("reset")) => Outcome::Reset,
        (502, _) => Outcome::BadGateway,
        (503, _) => Outcome::Unavailable,
        _ => Outcome::ServerError,
    };
    Answer {
        outcome,
        backend,
        upstream_close,
        pooled,
    }
}
// ANCHOR_END: classify

/// One `/work` request every `interval` until told to stop, each with its
/// own id (the row it should write).
pub async fn steady_traffic(
    client: reqwest::Client,
    url: String,
    interval: Duration,
    timeout: Duration,
    mut stopped: watch::Receiver<bool>,
) -> Vec<RequestSample> {
    let mut requests = JoinSet::new();
    let mut ticker = tokio::time::interval(interval);
    let mut next_id = 1u64;
    // Bounded in count as well as time: the stop signal ends it, and so does
    // this many requests (far more than any mode sends).
    while next_id < 100_000 {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stopped.changed() => break,
        }
        let id = next_id;
        next_id += 1;
        let request = client.get(format!("{url}?id={id}")).timeout(timeout).send();
        requests.spawn(async move {
            let start = monotonic_ms();
            let answer = classify(request.await).await;
            request_sample("work", start, answer, Some(id))
        });
    }
    let mut samples = Vec::new();
    while let Some(joined) = requests.join_next().await {
        if let Ok(sample) = joined {
            samples.push(sample);
        }
    }
    samples
}

/// A long request pinned to the server (index 0).
pub async fn slow_request(
    client: reqwest::Client,
    url: String,
    timeout: Duration,
) -> RequestSample {
    let start = monotonic_ms();
    let sent = client
        .get(url)
        .header(PIN_HEADER, "0")
        .timeout(timeout)
        .send()
        .await;
    request_sample("slow", start, classify(sent).await, None)
}

// ANCHOR: stream_client
/// A server-sent-events client pinned to the server. A polite one leaves when
/// it reads `event: goaway`; a stubborn one keeps reading until the stream
/// breaks.
pub async fn stream_client(
    client: reqwest::Client,
    url: String,
    polite: bool,
    mut stopped: watch::Receiver<bool>,
) -> RequestSample {
    let start = monotonic_ms();
    let sent = client.get(&url).header(PIN_HEADER, "0").send().await;
    let mut response = match sent {
        Ok(response) if response.status() == reqwest::StatusCode::OK => response,
        other => {
            return request_sample("stream", start, classify(other).await, None);
        }
    };
    let backend = backend_of(&response);
    let result = loop {
        tokio::select! {
            chunk = response.chunk() => match chunk {
                Ok(Some(bytes)) => {
                    if polite && bytes.windows(13).any(|window| window == b"event: goaway") {
                        // Leave now; a real client reconnects, through the
                        // balancer, to a backend that is still ready.
                        break Outcome::Ok;
                    }
                }
                Ok(None) => break Outcome::Ok,
                Err(_) => break Outcome::Reset,
            },
            _ = stopped.changed() => break Outcome::Open,
        }
    };
    let answer = Answer {
        outcome: result,
        backend,
        upstream_close: false,
        pooled: false,
    };
    request_sample("stream", start, answer, None)
}
// ANCHOR_END: stream_client
