//! Just enough HTTP/1.1 on a raw TCP socket for this lab: read a request or a
//! response head with `httparse`, read a body framed by `Content-Length` or
//! chunked encoding, and tell apart the three ways a keep-alive connection can
//! fail under a client: an orderly close (EOF), a reset, or garbage.
//!
//! The lab needs this rather than hyper's client because it has to see exactly
//! what happened on the socket: hyper would hide a reused-connection failure
//! behind a retry or an error message.

use std::{fmt, io, time::Duration};

use lab_kit::conn::{Conn, Connector};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The largest head this lab accepts; anything bigger is treated as garbage.
const MAX_HEAD: usize = 64 * 1024;
/// The largest body this lab reads into memory.
const MAX_BODY: usize = 8 * 1024 * 1024;

/// How reading from a connection failed.
#[derive(Debug)]
pub enum WireError {
    /// The peer closed its side (EOF) before a complete message; `partial`
    /// bytes of the message had arrived.
    Closed { partial: usize },
    /// The peer reset the connection (ECONNRESET or EPIPE).
    Reset,
    /// The bytes are not HTTP/1.x.
    Garbage(String),
    /// Any other socket error.
    Io(io::Error),
}

impl fmt::Display for WireError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Closed { partial: 0 } => {
                formatter.write_str("the peer closed the connection before sending anything")
            }
            WireError::Closed { partial } => write!(
                formatter,
                "the peer closed the connection after {partial} bytes of an incomplete message"
            ),
            WireError::Reset => formatter.write_str("the peer reset the connection"),
            WireError::Garbage(what) => write!(formatter, "not HTTP/1.x: {what}"),
            WireError::Io(error) => write!(formatter, "socket error: {error}"),
        }
    }
}

impl std::error::Error for WireError {}

impl From<io::Error> for WireError {
    fn from(error: io::Error) -> WireError {
        if lab_kit::net::is_reset(&error) {
            WireError::Reset
        } else {
            WireError::Io(error)
        }
    }
}

impl WireError {
    /// A short name for records: `closed`, `reset`, `garbage` or `io`.
    pub fn kind(&self) -> &'static str {
        match self {
            WireError::Closed { .. } => "closed",
            WireError::Reset => "reset",
            WireError::Garbage(_) => "garbage",
            WireError::Io(_) => "io",
        }
    }
}

/// A header name and value, as text.
pub type Header = (String, String);

/// A parsed response head plus its body.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<Header>,
    pub body: Vec<u8>,
    /// The server said `Connection: close`, or the body ran to EOF: the
    /// connection cannot carry another request.
    pub close: bool,
}

impl Response {
    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

/// A parsed request head plus its body.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub headers: Vec<Header>,
    pub body: Vec<u8>,
    /// The client said `Connection: close`.
    pub close: bool,
}

/// The first header with this name (case-insensitive).
pub fn header<'a>(headers: &'a [Header], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

fn has_token(headers: &[Header], name: &str, token: &str) -> bool {
    headers
        .iter()
        .filter(|(key, _)| key.eq_ignore_ascii_case(name))
        .flat_map(|(_, value)| value.split(','))
        .any(|item| item.trim().eq_ignore_ascii_case(token))
}

/// A connection (TCP, or TLS over it: `lab_kit::conn`) with a read buffer,
/// so bytes that arrive after one message are kept for the next.
pub struct Wire {
    pub stream: Conn,
    buffer: Vec<u8>,
}

impl Wire {
    pub fn new(stream: impl Into<Conn>) -> Wire {
        Wire {
            stream: stream.into(),
            buffer: Vec::with_capacity(4096),
        }
    }

    /// Connects to `addr` over plain TCP, failing after `limit`.
    pub async fn connect(addr: std::net::SocketAddr, limit: Duration) -> io::Result<Wire> {
        Wire::connect_with(&Connector::Plain, addr, limit).await
    }

    /// Connects to `addr` as `connector` says (plain or TLS), failing after
    /// `limit`.
    pub async fn connect_with(
        connector: &Connector,
        addr: std::net::SocketAddr,
        limit: Duration,
    ) -> io::Result<Wire> {
        Ok(Wire::new(connector.connect(addr, limit).await?))
    }

    /// Bytes read from the socket but not yet used by a message.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }

    /// The bytes read but not yet taken as a message: what a peer sent that
    /// was not HTTP, for a caller to name it.
    pub fn unread(&self) -> &[u8] {
        &self.buffer
    }

    /// Throws away buffered bytes.
    pub fn clear(&mut self) {
        self.buffer.clear();
    }

    pub async fn send(&mut self, bytes: &[u8]) -> Result<(), WireError> {
        self.stream.write_all(bytes).await?;
        Ok(())
    }

    /// Reads more of a head (or a chunk line), which may not grow past
    /// `MAX_HEAD` (`what` names it in the error); `Ok(false)` when the peer
    /// closed instead.
    async fn fill_head(&mut self, what: &str) -> Result<bool, WireError> {
        if self.buffer.len() > MAX_HEAD {
            return Err(WireError::Garbage(format!("{what} over 64 KiB")));
        }
        Ok(self.fill().await? > 0)
    }

    /// The peer closed with `partial` bytes of a message read.
    fn closed_early(&self) -> WireError {
        WireError::Closed {
            partial: self.buffer.len(),
        }
    }

    /// Reads more bytes into the buffer; `Ok(0)` is EOF.
    async fn fill(&mut self) -> Result<usize, WireError> {
        let mut chunk = [0u8; 8192];
        let count = self.stream.read(&mut chunk).await?;
        self.buffer.extend_from_slice(&chunk[..count]);
        Ok(count)
    }

    /// Waits until the peer closes (`Ok(None)`), resets (`Err`), or sends
    /// bytes (`Ok(Some(count))`). The bytes stay in the buffer.
    pub async fn wait_for_activity(&mut self) -> Result<Option<usize>, WireError> {
        if !self.buffer.is_empty() {
            return Ok(Some(self.buffer.len()));
        }
        match self.fill().await? {
            0 => Ok(None),
            count => Ok(Some(count)),
        }
    }

    /// Reads one message head: `parse` returns the head's length and what it
    /// keeps of it once the buffer holds all of it. `Ok(None)` when the peer
    /// closed before sending a byte of it.
    async fn read_head<T>(
        &mut self,
        what: &str,
        mut parse: impl FnMut(&[u8]) -> Result<Option<(usize, T)>, httparse::Error>,
    ) -> Result<Option<T>, WireError> {
        loop {
            match parse(&self.buffer) {
                Ok(Some((head_len, head))) => {
                    self.buffer.drain(..head_len);
                    return Ok(Some(head));
                }
                Ok(None) => {}
                Err(error) => return Err(garbage(&self.buffer, error)),
            }
            if !self.fill_head(what).await? {
                return if self.buffer.is_empty() {
                    Ok(None)
                } else {
                    Err(self.closed_early())
                };
            }
        }
    }

    /// Reads a complete response to a request with method `method`.
    pub async fn read_response(&mut self, method: &str) -> Result<Response, WireError> {
        let (status, http10, headers) = loop {
            let head = self.read_head("a response head", |buffer| {
                let mut header_slots = [httparse::EMPTY_HEADER; 64];
                let mut parsed = httparse::Response::new(&mut header_slots);
                let complete = parsed.parse(buffer)?;
                let status = parsed.code.unwrap_or(0);
                let http10 = parsed.version == Some(0);
                Ok(complete.is_complete().then(|| {
                    let head = (status, http10, owned_headers(parsed.headers));
                    (complete.unwrap(), head)
                }))
            });
            let Some((status, http10, headers)) = head.await? else {
                return Err(self.closed_early());
            };
            // 1xx interim responses carry no body; skip to the final one.
            if !(100..200).contains(&status) || status == 101 {
                break (status, http10, headers);
            }
        };
        let no_body = method.eq_ignore_ascii_case("HEAD")
            || status == 204
            || status == 304
            || (100..200).contains(&status);
        // An HTTP/1.0 answer keeps the connection only when it says
        // `Connection: keep-alive` (RFC 9112, section 9.3).
        let mut close = has_token(&headers, "connection", "close")
            || (http10 && !has_token(&headers, "connection", "keep-alive"));
        let body = if no_body {
            Vec::new()
        } else if has_token(&headers, "transfer-encoding", "chunked") {
            self.read_chunked().await?
        } else if let Some(length) = content_length(&headers)? {
            self.read_exact_body(length).await?
        } else {
            // No framing: the body runs until the server closes.
            close = true;
            self.read_to_eof().await?
        };
        Ok(Response {
            status,
            headers,
            body,
            close,
        })
    }

    /// Reads a complete request; `Ok(None)` when the client closed cleanly
    /// between requests.
    pub async fn read_request(&mut self) -> Result<Option<Request>, WireError> {
        let head = self.read_head("a request head", |buffer| {
            let mut header_slots = [httparse::EMPTY_HEADER; 64];
            let mut parsed = httparse::Request::new(&mut header_slots);
            let complete = parsed.parse(buffer)?;
            let method = parsed.method.unwrap_or("GET").to_string();
            let target = parsed.path.unwrap_or("/").to_string();
            let headers = owned_headers(parsed.headers);
            Ok(complete
                .is_complete()
                .then(|| (complete.unwrap(), (method, target, headers))))
        });
        let Some((method, target, headers)) = head.await? else {
            return Ok(None);
        };
        if has_token(&headers, "transfer-encoding", "chunked") {
            return Err(WireError::Garbage(
                "chunked request bodies are not supported by this lab".into(),
            ));
        }
        let body = match content_length(&headers)? {
            Some(length) => self.read_exact_body(length).await?,
            None => Vec::new(),
        };
        let close = has_token(&headers, "connection", "close");
        Ok(Some(Request {
            method,
            target,
            headers,
            body,
            close,
        }))
    }

    async fn read_exact_body(&mut self, length: usize) -> Result<Vec<u8>, WireError> {
        if length > MAX_BODY {
            return Err(WireError::Garbage(format!(
                "a body of {length} bytes is over this lab's limit"
            )));
        }
        while self.buffer.len() < length {
            if self.fill().await? == 0 {
                return Err(self.closed_early());
            }
        }
        Ok(self.buffer.drain(..length).collect())
    }

    async fn read_to_eof(&mut self) -> Result<Vec<u8>, WireError> {
        while self.fill().await? > 0 {
            if self.buffer.len() > MAX_BODY {
                return Err(WireError::Garbage("an unframed body over the limit".into()));
            }
        }
        Ok(std::mem::take(&mut self.buffer))
    }

    async fn read_line(&mut self) -> Result<String, WireError> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|pair| pair == b"\r\n") {
                let line: Vec<u8> = self.buffer.drain(..end + 2).collect();
                return Ok(String::from_utf8_lossy(&line[..end]).into_owned());
            }
            if !self.fill_head("a chunk line").await? {
                return Err(self.closed_early());
            }
        }
    }

    async fn read_chunked(&mut self) -> Result<Vec<u8>, WireError> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line().await?;
            let size_text = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| WireError::Garbage(format!("bad chunk size {size_text:?}")))?;
            if size == 0 {
                // Trailers, then an empty line.
                while !self.read_line().await?.is_empty() {}
                return Ok(body);
            }
            if body.len() + size > MAX_BODY {
                return Err(WireError::Garbage("a chunked body over the limit".into()));
            }
            let chunk = self.read_exact_body(size + 2).await?;
            body.extend_from_slice(&chunk[..size]);
        }
    }
}

fn owned_headers(headers: &[httparse::Header<'_>]) -> Vec<Header> {
    headers
        .iter()
        .map(|item| {
            (
                item.name.to_string(),
                String::from_utf8_lossy(item.value).into_owned(),
            )
        })
        .collect()
}

fn content_length(headers: &[Header]) -> Result<Option<usize>, WireError> {
    match header(headers, "content-length") {
        None => Ok(None),
        Some(text) => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| WireError::Garbage(format!("bad Content-Length {text:?}"))),
    }
}

fn garbage(buffer: &[u8], error: httparse::Error) -> WireError {
    let preview: String = String::from_utf8_lossy(&buffer[..buffer.len().min(40)])
        .chars()
        .map(|letter| if letter.is_control() { '.' } else { letter })
        .collect();
    WireError::Garbage(format!("{error} (first bytes: {preview:?})"))
}

/// A minimal GET request that asks to keep the connection open.
pub fn get_request(path: &str, host: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: lab-keepalive-race\r\n\r\n")
        .into_bytes()
}

/// The `timeout=N` of a `Keep-Alive` response header, in seconds.
pub fn keep_alive_timeout(value: &str) -> Option<f64> {
    value.split(',').find_map(|item| {
        let (name, number) = item.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("timeout")
            .then(|| number.trim().parse().ok())?
    })
}
