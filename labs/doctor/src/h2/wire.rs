//! Just enough HTTP/2 on one connection for the doctor's HTTP/2 checks:
//! frames written and read by hand (RFC 9113), so a check can do what no
//! client library would (a header block that never ends, a stream held open
//! past the server's limit) and see every frame the server sends back
//! (SETTINGS, PING, GOAWAY, RST_STREAM). Header blocks go through HPACK
//! (`loona-hpack`). As a real client must, it acknowledges the server's
//! SETTINGS and PINGs as they arrive.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use lab_kit::conn::{Conn, Connector};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a client sends first: the preface, then its SETTINGS.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The largest frame payload the doctor reads (the protocol's default).
const MAX_FRAME: usize = 16_384;

/// Frame types (RFC 9113, section 6).
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;

/// Flags.
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

/// SETTINGS_MAX_CONCURRENT_STREAMS.
pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;

/// An error code's name, as the report writes it (RFC 9113, section 7).
pub fn error_name(code: u32) -> String {
    let name = match code {
        0x0 => "NO_ERROR",
        0x1 => "PROTOCOL_ERROR",
        0x2 => "INTERNAL_ERROR",
        0x3 => "FLOW_CONTROL_ERROR",
        0x4 => "SETTINGS_TIMEOUT",
        0x5 => "STREAM_CLOSED",
        0x6 => "FRAME_SIZE_ERROR",
        0x7 => "REFUSED_STREAM",
        0x8 => "CANCEL",
        0x9 => "COMPRESSION_ERROR",
        0xa => "CONNECT_ERROR",
        0xb => "ENHANCE_YOUR_CALM",
        0xc => "INADEQUATE_SECURITY",
        0xd => "HTTP_1_1_REQUIRED",
        other => return format!("error {other:#x}"),
    };
    name.to_string()
}

/// One frame as read.
#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// A GOAWAY's last stream id and error code.
    pub fn goaway(&self) -> Option<(u32, u32)> {
        (self.kind == GOAWAY && self.payload.len() >= 8).then(|| {
            (
                u32::from_be_bytes(self.payload[0..4].try_into().unwrap_or_default()) & 0x7fff_ffff,
                u32::from_be_bytes(self.payload[4..8].try_into().unwrap_or_default()),
            )
        })
    }

    /// A RST_STREAM's error code.
    pub fn reset_code(&self) -> Option<u32> {
        (self.kind == RST_STREAM && self.payload.len() >= 4)
            .then(|| u32::from_be_bytes(self.payload[0..4].try_into().unwrap_or_default()))
    }

    pub fn ends_stream(&self) -> bool {
        matches!(self.kind, DATA | HEADERS) && self.flags & END_STREAM != 0
    }
}

/// The bytes of one frame.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = payload.len() as u32;
    let mut bytes = Vec::with_capacity(9 + payload.len());
    bytes.extend_from_slice(&length.to_be_bytes()[1..]);
    bytes.extend_from_slice(&[kind, flags]);
    bytes.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// How the connection ended, when it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The server closed the connection (EOF).
    Closed,
    /// The server reset it.
    Reset,
}

/// One HTTP/2 connection, as a client.
pub struct H2 {
    conn: Conn,
    buffer: Vec<u8>,
    encoder: loona_hpack::Encoder<'static>,
    decoder: loona_hpack::Decoder<'static>,
    /// The `:authority` and `:scheme` every request carries.
    authority: String,
    scheme: &'static str,
    /// The server's first SETTINGS, as (identifier, value) pairs.
    pub settings: Vec<(u16, u32)>,
    /// Whether [`H2::next`] acknowledges SETTINGS and PINGs (not in the
    /// middle of a header block, where only CONTINUATION may follow).
    pub acknowledge: bool,
}

impl H2 {
    /// Connects to `addr` as `connector` says, checks that TLS agreed on
    /// `h2` (ALPN) where there is TLS, sends the preface and SETTINGS (no
    /// server push), and reads until the server's SETTINGS, which it
    /// acknowledges. Within `limit`.
    pub async fn open(
        connector: &Connector,
        addr: std::net::SocketAddr,
        authority: &str,
        limit: Duration,
    ) -> Result<H2> {
        let work = async {
            // The io error as it is: a TLS failure inside it is named by the
            // caller (`tls::connect_failure`).
            let conn = connector.connect(addr, limit).await?;
            let scheme = match conn.tls() {
                Some(session) if session.alpn_protocol() != Some(b"h2") => {
                    bail!("{addr} did not agree to h2 in the TLS handshake (ALPN)")
                }
                Some(_) => "https",
                None => "http",
            };
            let mut h2 = H2 {
                conn,
                buffer: Vec::new(),
                encoder: loona_hpack::Encoder::new(),
                decoder: loona_hpack::Decoder::new(),
                authority: authority.to_string(),
                scheme,
                settings: Vec::new(),
                acknowledge: true,
            };
            let mut hello = PREFACE.to_vec();
            // SETTINGS_ENABLE_PUSH = 0.
            hello.extend(frame(SETTINGS, 0, 0, &[0, 2, 0, 0, 0, 0]));
            h2.send(&hello).await?;
            loop {
                let Some(frame) = h2.next().await? else {
                    bail!("{addr} closed the connection before its SETTINGS (not HTTP/2?)");
                };
                if frame.kind == SETTINGS && frame.flags & ACK == 0 {
                    h2.settings = frame
                        .payload
                        .chunks_exact(6)
                        .map(|pair| {
                            let id = u16::from_be_bytes([pair[0], pair[1]]);
                            let value = u32::from_be_bytes([pair[2], pair[3], pair[4], pair[5]]);
                            (id, value)
                        })
                        .collect();
                    return Ok(h2);
                }
            }
        };
        tokio::time::timeout(limit, work)
            .await
            .with_context(|| format!("no HTTP/2 SETTINGS from {addr} within {limit:?}"))?
    }

    /// The connection underneath (its TLS session).
    pub fn conn(&self) -> &Conn {
        &self.conn
    }

    /// A setting the server sent, if it sent it.
    pub fn setting(&self, id: u16) -> Option<u32> {
        self.settings
            .iter()
            .find(|(setting, _)| *setting == id)
            .map(|(_, value)| *value)
    }

    pub async fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.conn
            .write_all(bytes)
            .await
            .context("writing to the connection")
    }

    /// A request's header block: `method` and `path`, this connection's
    /// scheme and authority, and `extra` headers.
    pub fn header_block(&mut self, method: &str, path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
        let mut headers: Vec<(&[u8], &[u8])> = vec![
            (b":method", method.as_bytes()),
            (b":scheme", self.scheme.as_bytes()),
            (b":authority", self.authority.as_bytes()),
            (b":path", path.as_bytes()),
        ];
        headers.extend(
            extra
                .iter()
                .map(|(name, value)| (name.as_bytes(), value.as_bytes())),
        );
        self.encoder.encode(headers)
    }

    /// Sends a whole request head on `stream`: HEADERS with END_HEADERS,
    /// and END_STREAM when `ends` (no body follows).
    pub async fn request(
        &mut self,
        stream: u32,
        method: &str,
        path: &str,
        ends: bool,
    ) -> Result<()> {
        let block = self.header_block(method, path, &[]);
        let flags = END_HEADERS | if ends { END_STREAM } else { 0 };
        self.send(&frame(HEADERS, flags, stream, &block)).await
    }

    /// The `:status` of a response's header block (it must be decoded, in
    /// order, to keep HPACK's table in step with the server's).
    pub fn status(&mut self, frame: &Frame) -> Option<u16> {
        let block = header_block_of(frame)?;
        let fields = self.decoder.decode(block).ok()?;
        fields
            .iter()
            .find(|(name, _)| name == b":status")
            .and_then(|(_, value)| std::str::from_utf8(value).ok()?.parse().ok())
    }

    /// The next frame, or `Ok(None)` at the end of the connection (a
    /// reset is `Err` whose root is [`End::Reset`]'s io error). Acknowledges
    /// the server's SETTINGS and PINGs on the way, as a client must.
    pub async fn next(&mut self) -> Result<Option<Frame>> {
        loop {
            if let Some(got) = self.take_frame()? {
                let ack = self.acknowledge && got.flags & ACK == 0;
                if ack && got.kind == SETTINGS {
                    self.send(&frame(SETTINGS, ACK, 0, &[])).await?;
                }
                if ack && got.kind == PING {
                    self.send(&frame(PING, ACK, 0, &got.payload)).await?;
                }
                return Ok(Some(got));
            }
            let mut chunk = [0u8; 16_384];
            let read = self.conn.read(&mut chunk).await?;
            if read == 0 {
                return Ok(None);
            }
            self.buffer.extend_from_slice(&chunk[..read]);
        }
    }

    /// One read within `limit`: how the connection ended, if it did, and
    /// the frame that came, if one did.
    pub async fn watch_one(&mut self, limit: Duration) -> (Option<End>, Option<Frame>) {
        match tokio::time::timeout(limit, self.next()).await {
            Err(_) => (None, None),
            Ok(Ok(Some(frame))) => (None, Some(frame)),
            Ok(Ok(None)) => (Some(End::Closed), None),
            Ok(Err(error)) => {
                let reset = error
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(lab_kit::net::is_reset);
                (Some(if reset { End::Reset } else { End::Closed }), None)
            }
        }
    }

    fn take_frame(&mut self) -> Result<Option<Frame>> {
        if self.buffer.len() < 9 {
            return Ok(None);
        }
        let length =
            u32::from_be_bytes([0, self.buffer[0], self.buffer[1], self.buffer[2]]) as usize;
        if length > MAX_FRAME {
            bail!(
                "a frame of {length} bytes, over the {MAX_FRAME} the doctor allowed (not HTTP/2?)"
            );
        }
        if self.buffer.len() < 9 + length {
            return Ok(None);
        }
        let head: Vec<u8> = self.buffer.drain(..9 + length).collect();
        Ok(Some(Frame {
            kind: head[3],
            flags: head[4],
            stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
            payload: head[9..].to_vec(),
        }))
    }
}

/// A HEADERS frame's header block, without its padding and priority.
fn header_block_of(frame: &Frame) -> Option<&[u8]> {
    if frame.kind != HEADERS {
        return None;
    }
    let mut block = &frame.payload[..];
    let mut pad = 0;
    if frame.flags & 0x8 != 0 {
        pad = *block.first()? as usize;
        block = block.get(1..)?;
    }
    if frame.flags & 0x20 != 0 {
        block = block.get(5..)?;
    }
    block.get(..block.len().checked_sub(pad)?)
}
