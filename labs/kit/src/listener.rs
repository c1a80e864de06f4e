//! A TCP listener that counts the connections it accepts, and how many are
//! open at once, and can be handed to `axum::serve` like a plain one.
//!
//! Counting on the server side is the ground truth for "how many connections
//! did that client open": no client-side guesswork, and it works the same for
//! reqwest, a raw socket, or a program written in another language.

use std::{
    io,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use tokio::net::TcpListener;

use crate::stream::{HookedStream, StreamHook};

/// Connection counters shared between the listener and whoever reads them.
#[derive(Debug, Default)]
pub struct ConnStats {
    accepted: AtomicU64,
    open: AtomicU64,
    peak_open: AtomicU64,
}

impl ConnStats {
    /// Connections accepted since the listener started.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Connections accepted and not yet closed by the server.
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::SeqCst)
    }

    /// The most connections that were open at the same moment.
    pub fn peak_open(&self) -> u64 {
        self.peak_open.load(Ordering::SeqCst)
    }

    fn opened(&self) {
        self.accepted.fetch_add(1, Ordering::SeqCst);
        let now_open = self.open.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak_open.fetch_max(now_open, Ordering::SeqCst);
    }
}

/// A [`TcpListener`] whose accepted streams are counted while they live.
pub struct CountingListener {
    inner: TcpListener,
    stats: Arc<ConnStats>,
}

impl CountingListener {
    /// Binds 127.0.0.1 on a port the kernel picks.
    pub async fn bind_loopback() -> io::Result<CountingListener> {
        let inner = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        Ok(CountingListener {
            inner,
            stats: Arc::default(),
        })
    }

    pub fn stats(&self) -> Arc<ConnStats> {
        Arc::clone(&self.stats)
    }
}

impl axum::serve::Listener for CountingListener {
    type Io = CountedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, peer)) => {
                    self.stats.opened();
                    let counted =
                        HookedStream::new(stream, OpenConnection(Arc::clone(&self.stats)));
                    return (counted, peer);
                }
                // As axum's own listener does (the facts crate's
                // `axum_accept` test measures it): a connection that failed
                // before it was accepted is skipped at once; any other error
                // (out of file descriptors) sleeps a second, rather than spin.
                Err(error) if is_connection_error(&error) => continue,
                Err(_) => tokio::time::sleep(std::time::Duration::from_secs(1)).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// The accept errors that concern one connection, not the listener.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// A server-side stream that counts itself out of the open connections
/// when it is dropped.
pub type CountedStream = HookedStream<OpenConnection>;

/// The hook of a [`CountedStream`]: it only needs its `Drop`.
pub struct OpenConnection(Arc<ConnStats>);

impl StreamHook for OpenConnection {}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}
