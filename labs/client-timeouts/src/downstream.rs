//! The failure shapes of a downstream, each a small real server on
//! 127.0.0.1 written on a raw socket, so that it fails exactly one way:
//! it does not complete the handshake, refuses, never reads, never answers,
//! stalls its body after the head, trickles its body, or answers normally.
//!
//! Every server counts the requests it is still busy with (read, not yet
//! answered, peer not gone), so a proxy test can ask "did anyone leave a
//! request behind?". Dropping a [`Downstream`] stops it and closes its sockets.

use std::{
    net::{Ipv4Addr, SocketAddr},
    sync::{
        Arc,
        atomic::{AtomicI64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result, bail};
use lab_kit::net::{AbortOnDrop, bind_loopback, spawn_accept_loop};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpSocket, TcpStream},
};

lab_kit::series! {
    /// How a downstream fails.
    pub enum Shape {
        /// Its accept queue is full, so the kernel drops the client's SYN: the
        /// connect itself hangs (what a firewall that drops packets looks like).
        NoHandshake => "no-handshake",
        /// Nothing listens on the port: the kernel answers the SYN with a reset.
        Refuses => "refuses",
        /// Accepts the connection and never reads from it.
        NeverReads => "never-reads",
        /// Reads the whole request and never answers.
        Silent => "silent",
        /// Sends the response head, then stalls before the body.
        StallsBody => "stalls-body",
        /// Sends the body one byte at a time, each just within any idle timeout.
        Trickles => "trickles",
        /// Answers at once.
        Normal => "normal",
    }
}

impl Shape {
    /// The shape's row on the grid chart (see `charts.toml`).
    pub fn row(self) -> usize {
        Shape::ALL
            .iter()
            .position(|shape| *shape == self)
            .expect("every shape is in ALL")
    }
}

/// What a shape sends, when it sends anything.
#[derive(Debug, Clone, Copy)]
pub struct Behaviour {
    /// Bytes of the response body.
    pub body_bytes: usize,
    /// Gap between two bytes of a trickled body.
    pub trickle_every: Duration,
}

/// A running downstream. Dropping it stops it.
pub struct Downstream {
    pub addr: SocketAddr,
    pub shape: Shape,
    busy: Arc<AtomicI64>,
    open: Arc<AtomicI64>,
    server: Option<AbortOnDrop>,
    // Held only to keep a port bound and a queue full.
    _sockets: Vec<TcpStream>,
    _bound: Option<TcpSocket>,
    _listener: Option<std::net::TcpListener>,
}

impl Downstream {
    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests read and not yet finished (answered, or the peer left).
    pub fn busy(&self) -> i64 {
        self.busy.load(Ordering::SeqCst)
    }

    /// Connections accepted and not yet closed.
    pub fn open(&self) -> i64 {
        self.open.load(Ordering::SeqCst)
    }

    /// Waits, for at most `limit`, until no request is busy.
    pub async fn settled(&self, limit: Duration) -> i64 {
        let deadline = tokio::time::Instant::now() + limit;
        while self.busy() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.busy()
    }

    /// Stops accepting and closes every connection at once, as a crashed
    /// process would.
    pub fn kill(mut self) {
        self.server.take();
    }

    /// A socket bound to 127.0.0.1 on a port the kernel picks, not yet
    /// listening; the downstream's address becomes its address.
    fn bind_socket(&mut self) -> Result<TcpSocket> {
        let socket = TcpSocket::new_v4().context("creating a socket")?;
        socket.bind(self.addr).context("binding 127.0.0.1:0")?;
        self.addr = socket.local_addr().context("reading the bound address")?;
        Ok(socket)
    }

    /// Starts a downstream of the given shape on 127.0.0.1, port 0.
    pub async fn start(shape: Shape, behaviour: Behaviour) -> Result<Downstream> {
        let busy = Arc::new(AtomicI64::new(0));
        let open = Arc::new(AtomicI64::new(0));
        let mut downstream = Downstream {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            shape,
            busy: Arc::clone(&busy),
            open: Arc::clone(&open),
            server: None,
            _sockets: Vec::new(),
            _bound: None,
            _listener: None,
        };
        match shape {
            Shape::Refuses => {
                // Bound but not listening: the port stays ours, and a SYN to
                // it gets a reset.
                let socket = downstream.bind_socket()?;
                downstream._bound = Some(socket);
            }
            Shape::NoHandshake => {
                let listener = downstream.bind_socket()?.listen(0).context("listening")?;
                // Never accepted: fill the accept queue until a connect no
                // longer completes; from then on the kernel drops new SYNs.
                for _ in 0..16 {
                    let attempt = tokio::time::timeout(
                        Duration::from_millis(100),
                        TcpStream::connect(downstream.addr),
                    )
                    .await;
                    match attempt {
                        Ok(Ok(stream)) => downstream._sockets.push(stream),
                        Ok(Err(error)) => return Err(error).context("filling the accept queue"),
                        Err(_) => break,
                    }
                }
                if downstream._sockets.len() >= 16 {
                    bail!("the accept queue never filled; the kernel accepted 16 connections");
                }
                downstream._listener = Some(listener.into_std().context("keeping the listener")?);
            }
            _ => {
                let listener = bind_loopback().await?;
                downstream.addr = listener.local_addr().context("reading the bound address")?;
                downstream.server = Some(spawn_accept_loop(listener, move |stream, _peer| {
                    let busy = Arc::clone(&busy);
                    let open = BusyGuard::new(&open);
                    async move {
                        serve(shape, behaviour, stream, busy).await;
                        drop(open);
                    }
                }));
            }
        }
        Ok(downstream)
    }
}

/// Counts a request as busy (or a connection as open, or an upstream request
/// as in flight) while it lives.
pub(crate) struct BusyGuard(Arc<AtomicI64>);

impl BusyGuard {
    pub(crate) fn new(busy: &Arc<AtomicI64>) -> BusyGuard {
        busy.fetch_add(1, Ordering::SeqCst);
        BusyGuard(Arc::clone(busy))
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One connection, served the way `shape` fails. Requests are answered one
/// after another on the same connection (keep-alive) by the shapes that
/// answer at all.
async fn serve(shape: Shape, behaviour: Behaviour, mut stream: TcpStream, busy: Arc<AtomicI64>) {
    if shape == Shape::NeverReads {
        // Hold the socket, read nothing: the client's bytes pile up in the
        // kernel's buffers until its writes block.
        std::future::pending::<()>().await;
    }
    let mut buffer = Vec::new();
    loop {
        if read_request(&mut stream, &mut buffer).await.is_err() {
            return;
        }
        let _busy = BusyGuard::new(&busy);
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n\
             content-length: {}\r\n\r\n",
            behaviour.body_bytes
        );
        match shape {
            Shape::Silent => return wait_for_close(&mut stream).await,
            Shape::StallsBody => {
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                return wait_for_close(&mut stream).await;
            }
            Shape::Trickles => {
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for _ in 0..behaviour.body_bytes {
                    tokio::time::sleep(behaviour.trickle_every).await;
                    if stream.write_all(b"x").await.is_err() {
                        return;
                    }
                }
            }
            Shape::Normal => {
                let mut response = head.into_bytes();
                response.extend(std::iter::repeat_n(b'x', behaviour.body_bytes));
                if stream.write_all(&response).await.is_err() {
                    return;
                }
            }
            Shape::NoHandshake | Shape::Refuses | Shape::NeverReads => return,
        }
    }
}

/// Reads until the peer closes or resets, throwing the bytes away.
async fn wait_for_close(stream: &mut TcpStream) {
    let mut scratch = [0u8; 4096];
    while let Ok(read) = stream.read(&mut scratch).await {
        if read == 0 {
            return;
        }
    }
}

/// Reads one request (head, then a `content-length` body) into `buffer`,
/// keeping any bytes of the next request that arrived with it.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Result<()> {
    let mut scratch = vec![0u8; 64 * 1024];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break at + 4;
        }
        if buffer.len() > 64 * 1024 {
            bail!("a request head over 64 KiB");
        }
        let read = stream.read(&mut scratch).await?;
        if read == 0 {
            bail!("the peer closed");
        }
        buffer.extend_from_slice(&scratch[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
    let body_length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .map(|value| value.trim().parse())
        .transpose()
        .context("a bad content-length")?
        .unwrap_or(0);
    let mut remaining = (head_end + body_length).saturating_sub(buffer.len());
    let consumed = (head_end + body_length).min(buffer.len());
    buffer.drain(..consumed);
    while remaining > 0 {
        let read = stream.read(&mut scratch).await?;
        if read == 0 {
            bail!("the peer closed inside a body");
        }
        let body_part = read.min(remaining);
        remaining -= body_part;
        buffer.extend_from_slice(&scratch[body_part..read]);
    }
    Ok(())
}
