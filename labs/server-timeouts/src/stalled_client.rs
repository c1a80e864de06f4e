//! The clients that stall a server connection, on raw sockets: each plays
//! one request (or part of one) and then does nothing, and [`watch`] notes
//! what the server does about it: answer, close, reset, or nothing at all.
//!
//! Raw sockets rather than an HTTP client, because the subject is what
//! happens on the socket: a client library would not send half a head, and
//! would hide a close behind a retry or an error message. The HTTP here is the
//! least the lab needs: a response head read with `httparse`, and a body
//! framed by `Content-Length` (the servers of this lab frame every body so).

use std::{
    io,
    net::SocketAddr,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use lab_kit::conn::{Conn, Connector};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

lab_kit::series! {
    /// What a client does to the server before it stalls.
    pub enum StalledClient {
        /// One request, answered; then nothing.
        Idle => "idle",
        /// Half a request head, then nothing (slowloris).
        HalfHeader => "half-header",
        /// A complete head announcing 100 body bytes, 3 of them, then nothing.
        StalledBody => "stalled-body",
        /// A request whose handler never finishes.
        HungHandler => "hung-handler",
    }
}

impl StalledClient {
    /// Its row in the lab's chart, top to bottom in the order of a request.
    pub fn row(self) -> u8 {
        match self {
            StalledClient::Idle => 0,
            StalledClient::HalfHeader => 1,
            StalledClient::StalledBody => 2,
            StalledClient::HungHandler => 3,
        }
    }
}

/// How a connection ended under the client, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionEnd {
    /// The server closed its side (EOF).
    Closed,
    /// The server reset the connection (ECONNRESET or EPIPE).
    Reset,
    /// Anything else: bytes that are not HTTP/1.x, another socket error.
    Failed(String),
}

impl From<io::Error> for ConnectionEnd {
    fn from(error: io::Error) -> ConnectionEnd {
        if lab_kit::net::is_reset(&error) {
            ConnectionEnd::Reset
        } else {
            ConnectionEnd::Failed(error.to_string())
        }
    }
}

/// A response, as far as the lab reads it.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    /// The `Keep-Alive` header, if the server sent one.
    pub keep_alive: Option<String>,
    /// The server said `Connection: close`.
    pub close: bool,
}

/// A client connection (TCP, or TLS over it: `lab_kit::conn`) with a read
/// buffer.
pub struct RawConnection {
    stream: Conn,
    buffer: Vec<u8>,
}

impl RawConnection {
    /// Connects to `addr` over plain TCP, failing after `limit`.
    pub async fn connect(addr: SocketAddr, limit: Duration) -> Result<RawConnection> {
        RawConnection::connect_with(&Connector::Plain, addr, limit).await
    }

    /// Connects to `addr` as `connector` says (plain or TLS), failing after
    /// `limit`.
    pub async fn connect_with(
        connector: &Connector,
        addr: SocketAddr,
        limit: Duration,
    ) -> Result<RawConnection> {
        let stream = connector
            .connect(addr, limit)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        Ok(RawConnection {
            stream,
            buffer: Vec::with_capacity(4096),
        })
    }

    /// Bytes read from the socket and not yet taken as an answer.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }

    pub async fn send(&mut self, bytes: &[u8]) -> Result<(), ConnectionEnd> {
        Ok(self.stream.write_all(bytes).await?)
    }

    /// Waits for the server's next bytes (kept in the buffer) or for the end
    /// of the connection.
    pub async fn fill(&mut self) -> Result<(), ConnectionEnd> {
        let mut chunk = [0u8; 8192];
        match self.stream.read(&mut chunk).await? {
            0 => Err(ConnectionEnd::Closed),
            count => {
                self.buffer.extend_from_slice(&chunk[..count]);
                Ok(())
            }
        }
    }

    /// The first whole response in the buffer, taken out of it; `None` while
    /// it is incomplete.
    pub fn take_answer(&mut self) -> Result<Option<Answer>, ConnectionEnd> {
        let mut header_slots = [httparse::EMPTY_HEADER; 32];
        let mut head = httparse::Response::new(&mut header_slots);
        let head_len = match head.parse(&self.buffer) {
            Ok(httparse::Status::Complete(length)) => length,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(error) => return Err(ConnectionEnd::Failed(format!("not HTTP/1.x: {error}"))),
        };
        let header = |name: &str| {
            head.headers
                .iter()
                .find(|header| header.name.eq_ignore_ascii_case(name))
                .map(|header| String::from_utf8_lossy(header.value).trim().to_string())
        };
        let body_len: usize = match header("content-length") {
            Some(text) => text
                .parse()
                .map_err(|_| ConnectionEnd::Failed(format!("Content-Length {text:?}")))?,
            None => 0,
        };
        if self.buffer.len() < head_len + body_len {
            return Ok(None);
        }
        let answer = Answer {
            status: head.code.unwrap_or(0),
            keep_alive: header("keep-alive"),
            close: header("connection").is_some_and(|value| value.eq_ignore_ascii_case("close")),
        };
        self.buffer.drain(..head_len + body_len);
        Ok(Some(answer))
    }

    /// Reads one whole response.
    pub async fn read_answer(&mut self) -> Result<Answer, ConnectionEnd> {
        loop {
            if let Some(answer) = self.take_answer()? {
                return Ok(answer);
            }
            self.fill().await?;
        }
    }
}

/// `GET path` with a `Host` header, keep-alive.
pub fn get_request(path: &str, host: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes()
}

/// What [`watch`] saw.
#[derive(Debug, Clone)]
pub struct WatchOutcome {
    /// The status of the first answer, and when its first byte arrived (lab
    /// ms after the client stalled), if any.
    pub answered: Option<(u16, f64)>,
    /// `closed` or `reset`, and when (lab ms), if the server ended it.
    pub closed: Option<(&'static str, f64)>,
    /// The `Keep-Alive` header of the idle client's answer.
    pub advertised: Option<String>,
}

impl WatchOutcome {
    pub fn verdict(&self) -> String {
        match (self.answered, self.closed) {
            (None, None) => "still open".into(),
            (None, Some((how, _))) => how.into(),
            (Some((status, _)), None) => format!("answered {status}, kept open"),
            (Some((status, _)), Some((how, _))) => format!("answered {status}, then {how}"),
        }
    }

    /// When the server first acted, lab ms.
    pub fn first_action_ms(&self) -> Option<f64> {
        match (self.answered, self.closed) {
            (Some((_, answered)), _) => Some(answered),
            (None, Some((_, closed))) => Some(closed),
            (None, None) => None,
        }
    }
}

/// Plays `client` against `addr` and watches the connection for `window`:
/// did the server answer, close, or do nothing?
pub async fn watch(
    addr: SocketAddr,
    client: StalledClient,
    window: Duration,
) -> Result<WatchOutcome> {
    let request = match client {
        StalledClient::Idle => get_request("/", "lab"),
        StalledClient::HalfHeader => b"GET / HTTP/1.1\r\nHost: lab\r\n".to_vec(),
        StalledClient::StalledBody => {
            b"POST /upload HTTP/1.1\r\nHost: lab\r\nContent-Length: 100\r\n\r\nabc".to_vec()
        }
        StalledClient::HungHandler => get_request("/hang", "lab"),
    };
    let idle = client == StalledClient::Idle;
    watch_request(&Connector::Plain, addr, &request, idle, window).await
}

/// Sends `request` (whole, or the part a stalled client sends) to `addr`;
/// with `answer_first`, reads one answer first (the idle client: the watch
/// starts once the connection is back between requests). Then watches the
/// connection for `window`. Any server will do: the doctor watches the
/// reader's own with it, over TLS where `connector` says so.
pub async fn watch_request(
    connector: &Connector,
    addr: SocketAddr,
    request: &[u8],
    answer_first: bool,
    window: Duration,
) -> Result<WatchOutcome> {
    let mut connection =
        RawConnection::connect_with(connector, addr, Duration::from_secs(2)).await?;
    let mut advertised = None;
    let sent = connection.send(request).await;
    sent.map_err(|end| anyhow::anyhow!("sending the request: {end:?}"))?;
    if answer_first {
        let answer = tokio::time::timeout(Duration::from_secs(5), connection.read_answer())
            .await
            .context("no answer to the idle client's request within 5 s")?
            .map_err(|end| anyhow::anyhow!("reading the idle client's answer: {end:?}"))?;
        advertised = answer.keep_alive;
    }
    let started = Instant::now();
    let deadline = started + window;
    let mut outcome = WatchOutcome {
        answered: None,
        closed: None,
        advertised,
    };
    let elapsed_ms = || started.elapsed().as_secs_f64() * 1000.0;
    // When the first byte of the answer still being read arrived.
    let mut answer_began = None;
    loop {
        match tokio::time::timeout_at(deadline.into(), connection.fill()).await {
            Err(_) => return Ok(outcome),
            Ok(Ok(())) => {
                let began = *answer_began.get_or_insert_with(elapsed_ms);
                while let Some(answer) = connection
                    .take_answer()
                    .map_err(|end| anyhow::anyhow!("reading an answer: {end:?}"))?
                {
                    outcome.answered = outcome.answered.or(Some((answer.status, began)));
                    answer_began = None;
                }
            }
            Ok(Err(ConnectionEnd::Closed)) => {
                outcome.closed = Some(("closed", elapsed_ms()));
                return Ok(outcome);
            }
            Ok(Err(ConnectionEnd::Reset)) => {
                outcome.closed = Some(("reset", elapsed_ms()));
                return Ok(outcome);
            }
            Ok(Err(ConnectionEnd::Failed(why))) => bail!("watching the connection: {why}"),
        }
    }
}
