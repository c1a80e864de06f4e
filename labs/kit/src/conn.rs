//! One client connection, plain TCP or TLS over it, for the probes that
//! speak HTTP/1.1 on a raw socket (the keep-alive lab's `Wire`, the
//! server-timeouts lab's stalled clients, the doctor's slow read): they read
//! and write a [`Conn`], and a [`Connector`] makes one, so the doctor can run
//! them against a TLS port unchanged.
//!
//! Over TLS, what the probes watch for keeps its meaning. A peer that closes
//! the TCP connection without TLS's `close_notify` reads as an end of file,
//! as its FIN does on a plain socket (rustls calls it an unexpected EOF); a
//! reset is the socket's reset either way. The TCP socket underneath is
//! always at hand ([`Conn::tcp`]) for what only the kernel knows
//! (`TCP_INFO`, `SO_LINGER`).

use std::{
    io,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use rustls::{ClientConfig, pki_types::ServerName};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
};
use tokio_rustls::{TlsConnector, client::TlsStream};

/// A connected client socket, plain or TLS.
#[derive(Debug)]
pub enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Conn {
    /// The TCP socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(stream) => stream,
            Conn::Tls(stream) => stream.get_ref().0,
        }
    }

    /// The TLS session, where there is one: its version and ALPN protocol.
    pub fn tls(&self) -> Option<&rustls::ClientConnection> {
        match self {
            Conn::Plain(_) => None,
            Conn::Tls(stream) => Some(stream.get_ref().1),
        }
    }
}

impl From<TcpStream> for Conn {
    fn from(stream: TcpStream) -> Conn {
        Conn::Plain(stream)
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_read(context, buffer),
            Conn::Tls(stream) => match Pin::new(stream).poll_read(context, buffer) {
                // The TCP FIN without close_notify: an end of file, as on a
                // plain socket (the buffer stays empty).
                Poll::Ready(Err(error)) if error.kind() == io::ErrorKind::UnexpectedEof => {
                    Poll::Ready(Ok(()))
                }
                other => other,
            },
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_write(context, bytes),
            Conn::Tls(stream) => Pin::new(stream).poll_write(context, bytes),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_flush(context),
            Conn::Tls(stream) => Pin::new(stream).poll_flush(context),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_shutdown(context),
            Conn::Tls(stream) => Pin::new(stream).poll_shutdown(context),
        }
    }
}

/// How to open a [`Conn`]: plain TCP, or TLS with this configuration and
/// server name (SNI and the certificate's name).
#[derive(Debug, Clone, Default)]
pub enum Connector {
    #[default]
    Plain,
    Tls {
        config: Arc<ClientConfig>,
        server_name: ServerName<'static>,
    },
}

impl Connector {
    /// Connects to `addr` (with `TCP_NODELAY`, as the probes write small
    /// pieces on purpose) and, over TLS, completes the handshake: all of it
    /// within `limit`. A TLS failure is an `InvalidData` error whose source is
    /// the `rustls::Error` ([`tls_error`] finds it).
    pub async fn connect(&self, addr: SocketAddr, limit: Duration) -> io::Result<Conn> {
        let work = async {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            self.over(stream).await
        };
        tokio::time::timeout(limit, work).await.map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connecting to {addr} took over {limit:?}"),
            )
        })?
    }

    /// The connection over a socket already connected (one with its own
    /// socket options): as it is, or after the TLS handshake.
    pub async fn over(&self, stream: TcpStream) -> io::Result<Conn> {
        match self {
            Connector::Plain => Ok(Conn::Plain(stream)),
            Connector::Tls {
                config,
                server_name,
            } => {
                let tls = TlsConnector::from(config.clone())
                    .connect(server_name.clone(), stream)
                    .await?;
                Ok(Conn::Tls(Box::new(tls)))
            }
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Connector::Tls { .. })
    }
}

/// The TLS failure inside an error from [`Connector::connect`], if it was one.
pub fn tls_error(error: &io::Error) -> Option<&rustls::Error> {
    error.get_ref()?.downcast_ref::<rustls::Error>()
}
