//! The price of no reuse with TLS: the same requests over rustls on loopback,
//! with a new connection and a full handshake per request, a new connection
//! that resumes the TLS session, and one connection reused for all of them.
//!
//! The server and the client each run on a thread of their own (a
//! current-thread tokio runtime apiece), so the CPU time each spends is that
//! thread's own clock (`CLOCK_THREAD_CPUTIME_ID`: user and kernel time, the
//! loopback's packet handling included), untouched by whatever else the
//! process does. The certificate is made at run time by rcgen; the crypto is
//! rustls's `ring` provider.

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, Result, anyhow, ensure};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::{Request, Response, body::Incoming, service::service_fn};
use hyper_util::rt::TokioIo;
use lab_kit::{Series, stats::Latencies};
use rustls::{
    ClientConfig, HandshakeKind, RootCertStore, ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName},
};
use serde::Serialize;
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpStream,
    sync::oneshot,
};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// A small response: the handshake, not the body, is what this part weighs.
const BODY: &[u8] = b"a small JSON answer, as an internal API would send";
/// A bound on each request, so a hung peer fails the run instead of holding it.
const REQUEST_BOUND: Duration = Duration::from_secs(5);

lab_kit::series! {
    /// How the TLS client reaches the server, request after request.
    pub enum TlsSetup in "tls" {
        /// A new client per request: a new TLS configuration (so an empty
        /// session cache), a new TCP connection and a full handshake.
        ClientPerRequest => "client-per-request",
        /// One client whose pool keeps nothing: a new TCP connection per
        /// request, but its TLS configuration, and with it the session
        /// tickets, is shared, so the handshake resumes the session.
        ResumedSession => "resumed-session",
        /// One client, one pooled connection, reused by every request.
        SharedConnection => "shared-connection",
    }
}

/// What one TLS setup measured.
#[derive(Debug, Clone, Serialize)]
pub struct TlsSummary {
    pub requests: usize,
    /// TCP connections the server accepted.
    pub connections: u64,
    /// Handshakes the server completed in full (certificate signed and sent)
    /// and by resuming a session (no certificate, no signature).
    pub full_handshakes: u64,
    pub resumed_handshakes: u64,
    pub wall_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// CPU time per request of the client's thread, of the server's, and both.
    pub client_cpu_us: f64,
    pub server_cpu_us: f64,
    pub cpu_us: f64,
}

/// A self-signed certificate for `localhost`, made now (ECDSA P-256).
pub struct Identity {
    certificate: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl Identity {
    pub fn generate() -> Result<Identity> {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
            .context("making a self-signed certificate")?;
        Ok(Identity {
            certificate: made.cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()),
        })
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

// ANCHOR: client_config
/// What a TLS client builds once: the roots it trusts and, inside the
/// configuration, its cache of session tickets. A client built per request
/// builds this per request too, so it never has a ticket to resume with.
fn client_config(identity: &Identity) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    roots
        .add(identity.certificate.clone())
        .context("trusting the lab's certificate")?;
    let config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3 with the ring provider")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}
// ANCHOR_END: client_config

/// The server's side: a thread with its own runtime, counting connections
/// and handshakes, and its own CPU time when it stops.
struct TlsServer {
    addr: SocketAddr,
    accepted: Arc<AtomicU64>,
    full: Arc<AtomicU64>,
    resumed: Arc<AtomicU64>,
    stop: oneshot::Sender<()>,
    thread: std::thread::JoinHandle<Result<Duration>>,
}

impl TlsServer {
    fn start(identity: &Identity) -> Result<TlsServer> {
        let config = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .context("TLS 1.3 with the ring provider")?
            .with_no_client_auth()
            .with_single_cert(
                vec![identity.certificate.clone()],
                PrivateKeyDer::Pkcs8(identity.key.clone_key()),
            )
            .context("the server's certificate and key")?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let (accepted, full, resumed) = Default::default();
        let counters = (
            Arc::clone(&accepted),
            Arc::clone(&full),
            Arc::clone(&resumed),
        );
        let (stop, stopped) = oneshot::channel();
        let (bound, bound_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            current_thread()?.block_on(serve(acceptor, counters, bound, stopped))
        });
        let addr = bound_rx
            .recv_timeout(REQUEST_BOUND)
            .map_err(|_| anyhow!("the TLS server thread did not start"))??;
        Ok(TlsServer {
            addr,
            accepted,
            full,
            resumed,
            stop,
            thread,
        })
    }

    /// Stops the server; its connections end with its runtime. Returns the
    /// server thread's CPU time from the first accept to the stop.
    fn stop(self) -> Result<Duration> {
        let _ = self.stop.send(());
        self.thread
            .join()
            .map_err(|_| anyhow!("the TLS server thread panicked"))?
    }
}

fn current_thread() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a current-thread runtime")
}

type Counters = (Arc<AtomicU64>, Arc<AtomicU64>, Arc<AtomicU64>);

async fn serve(
    acceptor: TlsAcceptor,
    (accepted, full, resumed): Counters,
    bound: std::sync::mpsc::Sender<Result<SocketAddr>>,
    mut stopped: oneshot::Receiver<()>,
) -> Result<Duration> {
    let listener = match lab_kit::net::bind_loopback().await {
        Ok(listener) => listener,
        Err(error) => {
            let _ = bound.send(Err(anyhow!("{error:#}")));
            return Err(error);
        }
    };
    let _ = bound.send(listener.local_addr().context("the server's address"));
    let cpu_before = thread_cpu();
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let (tcp, _) = tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => accepted.context("accepting")?,
        };
        accepted.fetch_add(1, Ordering::SeqCst);
        let (acceptor, full, resumed) = (acceptor.clone(), Arc::clone(&full), Arc::clone(&resumed));
        connections.spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            match tls.get_ref().1.handshake_kind() {
                Some(HandshakeKind::Resumed) => resumed.fetch_add(1, Ordering::SeqCst),
                _ => full.fetch_add(1, Ordering::SeqCst),
            };
            let answer = service_fn(|_: Request<Incoming>| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(BODY))))
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), answer)
                .await;
        });
    }
    Ok(thread_cpu().saturating_sub(cpu_before))
}

/// This thread's CPU time, user and kernel (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own; this clock exists on
    // every Linux since 2.6.12.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "CLOCK_THREAD_CPUTIME_ID");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// One GET over any connected stream (plain TCP or TLS), body read to the end.
/// The connection's task is returned, so a caller that keeps the sender can
/// send again; dropping both closes the connection from the client side.
pub async fn handshake<IO>(
    io: IO,
) -> Result<(
    hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    tokio::task::JoinHandle<()>,
)>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .context("HTTP/1.1 handshake")?;
    let task = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok((sender, task))
}

/// Sends one GET on an open connection and reads the body to the end.
pub async fn get(sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>) -> Result<()> {
    sender.ready().await.context("connection not ready")?;
    let request = Request::get("/")
        .header(hyper::header::HOST, "localhost")
        .body(Empty::new())
        .context("building the request")?;
    let response = sender.send_request(request).await.context("sending")?;
    ensure!(
        response.status().is_success(),
        "status {}",
        response.status()
    );
    response
        .into_body()
        .collect()
        .await
        .context("reading the body")?;
    Ok(())
}

// ANCHOR: per_request
/// A new TCP connection and a TLS handshake: what every request pays when
/// nothing is reused. With a fresh `config` the handshake is a full one.
async fn connect(
    config: Arc<ClientConfig>,
    addr: SocketAddr,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await.context("connecting")?;
    let name = ServerName::try_from("localhost").context("server name")?;
    TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .context("TLS handshake")
}
// ANCHOR_END: per_request

/// The client's side: `requests` requests one after another, on this thread.
async fn client(
    setup: TlsSetup,
    identity: &Identity,
    addr: SocketAddr,
    requests: usize,
) -> Result<(Latencies, Duration)> {
    let cpu_before = thread_cpu();
    let shared_config = client_config(identity)?;
    let mut kept = None;
    let mut latencies = Latencies::default();
    for _ in 0..requests {
        let sent = Instant::now();
        let one = async {
            match setup {
                TlsSetup::ClientPerRequest | TlsSetup::ResumedSession => {
                    let config = match setup {
                        TlsSetup::ClientPerRequest => client_config(identity)?,
                        _ => Arc::clone(&shared_config),
                    };
                    let (mut sender, task) = handshake(connect(config, addr).await?).await?;
                    get(&mut sender).await?;
                    // Dropping the sender ends the connection's task, which
                    // closes the socket: the client closes first.
                    drop(sender);
                    task.await.context("the connection task")?;
                }
                TlsSetup::SharedConnection => {
                    if kept.is_none() {
                        let tls = connect(Arc::clone(&shared_config), addr).await?;
                        kept = Some(handshake(tls).await?);
                    }
                    let (sender, _) = kept.as_mut().expect("a connection was just made");
                    get(sender).await?;
                }
            }
            anyhow::Ok(())
        };
        tokio::time::timeout(REQUEST_BOUND, one)
            .await
            .map_err(|_| anyhow!("a request took over {REQUEST_BOUND:?}"))??;
        latencies.record(sent.elapsed());
    }
    drop(kept);
    Ok((latencies, thread_cpu().saturating_sub(cpu_before)))
}

/// One setup: a fresh server, `requests` requests from a client thread.
pub fn measure_tls(
    setup: TlsSetup,
    identity: Arc<Identity>,
    requests: usize,
) -> Result<TlsSummary> {
    ensure!(requests > 0, "tls_requests must be positive");
    let server = TlsServer::start(&identity)?;
    let addr = server.addr;
    let started = Instant::now();
    let client_thread = std::thread::spawn(move || {
        current_thread()?.block_on(client(setup, &identity, addr, requests))
    });
    let client_result = client_thread
        .join()
        .map_err(|_| anyhow!("the TLS client thread panicked"));
    let wall = started.elapsed();
    let (accepted, full, resumed) = (
        server.accepted.load(Ordering::SeqCst),
        server.full.load(Ordering::SeqCst),
        server.resumed.load(Ordering::SeqCst),
    );
    let server_cpu = server.stop()?;
    let (latencies, client_cpu) = client_result??;
    let latency = latencies.summary();
    let per_request = |cpu: Duration| cpu.as_secs_f64() * 1e6 / requests as f64;
    Ok(TlsSummary {
        requests,
        connections: accepted,
        full_handshakes: full,
        resumed_handshakes: resumed,
        wall_ms: wall.as_secs_f64() * 1000.0,
        p50_ms: latency.p50_ms,
        p99_ms: latency.p99_ms,
        client_cpu_us: per_request(client_cpu),
        server_cpu_us: per_request(server_cpu),
        cpu_us: per_request(client_cpu + server_cpu),
    })
}

/// The TLS part: every setup, one after another, in the order the chapter
/// shows them.
pub async fn measure_all(requests: usize) -> Result<Vec<(TlsSetup, TlsSummary)>> {
    let identity = Arc::new(Identity::generate()?);
    let mut summaries = Vec::new();
    for setup in TlsSetup::ALL {
        eprintln!(
            "conn-reuse: {} ({requests} requests over TLS)",
            setup.series()
        );
        let identity = Arc::clone(&identity);
        let summary = tokio::task::spawn_blocking(move || measure_tls(setup, identity, requests))
            .await
            .context("the TLS part panicked")?
            .with_context(|| format!("setup {}", setup.series()))?;
        summaries.push((setup, summary));
    }
    Ok(summaries)
}
