//! GET requests to one server, plain or TLS, for the probes that send real
//! traffic (the doctor's load and deadline checks, the shutdown probe).
//!
//! Over plain TCP a [`Fetcher`] is the reqwest client the probes always
//! used, so what they measure there is unchanged. Over TLS it is hyper-util's
//! client on [`crate::conn`]'s connections: the book's one build compiles
//! reqwest without TLS, so that its feature set (and what the other labs'
//! clients do when built) stays as it was. Either way a request ends as a [`Fetched`] or one of three
//! [`FetchError`]s, which is all the probes read.

use std::{
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::{Uri, rt::ReadBufCursor};
use hyper_util::{
    client::legacy::{
        Client,
        connect::{Connected, Connection},
    },
    rt::{TokioExecutor, TokioIo},
};

use crate::conn::{Conn, Connector};

/// A GET client for one server.
#[derive(Clone)]
pub enum Fetcher {
    Reqwest(reqwest::Client),
    Tls(Box<Client<ToServer, Empty<Bytes>>>),
}

/// What a GET brought back: the status, the `Retry-After` header, and
/// whether the whole body came (`false`: the connection ended inside it).
#[derive(Debug, Clone)]
pub struct Fetched {
    pub status: u16,
    pub retry_after: Option<String>,
    pub body_complete: bool,
}

/// How a GET failed before its status came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchError {
    /// No answer within the request's timeout.
    Timeout,
    /// No connection: refused, or (over TLS) no handshake.
    Connect,
    /// The connection ended, or anything else.
    Other,
}

impl Fetcher {
    /// The TLS client for the server at `addr` (every request goes there,
    /// whatever the URL's host): connections pooled as reqwest's would be,
    /// or with `pooled` false a new one per request, as a kubelet probe.
    pub fn tls(connector: Connector, addr: SocketAddr, pooled: bool) -> Fetcher {
        let mut builder = Client::builder(TokioExecutor::new());
        if !pooled {
            builder.pool_max_idle_per_host(0);
        }
        Fetcher::Tls(Box::new(builder.build(ToServer { connector, addr })))
    }

    /// GETs `url` and reads its body, all within `timeout`.
    pub async fn get(&self, url: &str, timeout: Duration) -> Result<Fetched, FetchError> {
        self.fetch(url, timeout, true).await
    }

    /// GETs `url` and drops the answer once its status came, as a caller
    /// that only wants the status does (over reqwest, such a connection
    /// is not reused: the conn-reuse lab's `unread-body`).
    pub async fn status(&self, url: &str, timeout: Duration) -> Result<u16, FetchError> {
        Ok(self.fetch(url, timeout, false).await?.status)
    }

    async fn fetch(&self, url: &str, timeout: Duration, read: bool) -> Result<Fetched, FetchError> {
        match self {
            Fetcher::Reqwest(client) => {
                let response = client
                    .get(url)
                    .timeout(timeout)
                    .send()
                    .await
                    .map_err(|error| {
                        if error.is_timeout() {
                            FetchError::Timeout
                        } else if error.is_connect() {
                            FetchError::Connect
                        } else {
                            FetchError::Other
                        }
                    })?;
                let fetched = Fetched::head(response.status(), response.headers());
                Ok(fetched.body(!read || response.bytes().await.is_ok()))
            }
            Fetcher::Tls(client) => {
                let uri: Uri = url.parse().map_err(|_| FetchError::Other)?;
                let work = async {
                    let response = client.get(uri).await.map_err(|error| {
                        if error.is_connect() {
                            FetchError::Connect
                        } else {
                            FetchError::Other
                        }
                    })?;
                    let fetched = Fetched::head(response.status(), response.headers());
                    Ok(fetched.body(!read || response.into_body().collect().await.is_ok()))
                };
                tokio::time::timeout(timeout, work)
                    .await
                    .map_err(|_| FetchError::Timeout)?
            }
        }
    }
}

impl Fetched {
    /// An answer's status and `Retry-After` (reqwest's and hyper's heads
    /// are the same `http` types), before its body is read.
    fn head(status: hyper::StatusCode, headers: &hyper::HeaderMap) -> Fetched {
        let retry_after = headers
            .get(hyper::header::RETRY_AFTER)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
        Fetched {
            status: status.as_u16(),
            retry_after,
            body_complete: false,
        }
    }

    /// With whether its body came whole.
    fn body(self, body_complete: bool) -> Fetched {
        Fetched {
            body_complete,
            ..self
        }
    }
}

/// hyper-util's connector for [`Fetcher::tls`]: every connection to one
/// address, through a [`Connector`].
#[derive(Clone)]
pub struct ToServer {
    connector: Connector,
    addr: SocketAddr,
}

/// How long a connection (with its TLS handshake) may take.
const CONNECT_LIMIT: Duration = Duration::from_secs(5);

impl tower::Service<Uri> for ToServer {
    type Response = HyperConn;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<HyperConn>> + Send>>;

    fn poll_ready(&mut self, _context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: Uri) -> Self::Future {
        let (connector, addr) = (self.connector.clone(), self.addr);
        Box::pin(async move {
            let conn = connector.connect(addr, CONNECT_LIMIT).await?;
            Ok(HyperConn(TokioIo::new(conn)))
        })
    }
}

/// A [`Conn`] as hyper reads and writes it.
pub struct HyperConn(TokioIo<Conn>);

impl Connection for HyperConn {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl hyper::rt::Read for HyperConn {
    fn poll_read(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(context, buffer)
    }
}

impl hyper::rt::Write for HyperConn {
    fn poll_write(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(context, bytes)
    }

    fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(context)
    }

    fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(context)
    }
}
