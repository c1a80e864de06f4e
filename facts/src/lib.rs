//! What the facts tests share: a bound on every test, a raw peer that sees
//! when a server closes, a hyper timer on a compressed clock, the socket
//! options the kernel reports for this process's connection, and a loopback
//! listener that never answers a SYN.
//!
//! Each test in `tests/facts` asserts one default of a pinned crate (or of
//! the kernel) that the book states; `book/facts.toml` names the test beside
//! the statement, and the book's "How we know" appendix lists them with the
//! crate versions from Cargo.lock.

use std::{
    future::Future,
    mem::ManuallyDrop,
    net::SocketAddr,
    os::fd::FromRawFd,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpSocket, TcpStream},
};

/// How long a connect or an answer on loopback may take on a busy 2-core
/// machine before a test calls it a failure.
pub const PATIENCE: Duration = Duration::from_secs(5);

/// Runs `test` and panics naming `what` if it takes longer than `bound`: no
/// facts test can hang the run.
pub async fn bounded<T>(what: &str, bound: Duration, test: impl Future<Output = T>) -> T {
    match tokio::time::timeout(bound, test).await {
        Ok(value) => value,
        Err(_) => panic!("{what}: not done within {bound:?}"),
    }
}

/// A client that speaks raw bytes, to send half a request or nothing at all
/// and see when the server closes.
pub struct RawPeer {
    stream: TcpStream,
    /// Bytes the server sent so far.
    pub received: Vec<u8>,
}

impl RawPeer {
    pub async fn connect(addr: SocketAddr) -> RawPeer {
        let stream = tokio::time::timeout(PATIENCE, TcpStream::connect(addr))
            .await
            .expect("connecting within the patience")
            .expect("connecting to the server");
        RawPeer {
            stream,
            received: Vec::new(),
        }
    }

    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("sending bytes");
    }

    /// Reads until the server closes (end of stream or reset) and returns
    /// how long that took, or `None` if it was still open after `window`.
    pub async fn closed_within(&mut self, window: Duration) -> Option<Duration> {
        let started = Instant::now();
        let mut buffer = [0u8; 4096];
        let read_to_end = async {
            loop {
                match self.stream.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(read) => self.received.extend_from_slice(&buffer[..read]),
                }
            }
        };
        tokio::time::timeout(window, read_to_end)
            .await
            .ok()
            .map(|()| started.elapsed())
    }

    /// Reads until the bytes so far contain `needle`, within the patience.
    pub async fn read_until(&mut self, needle: &str) {
        let mut buffer = [0u8; 4096];
        let found = |received: &[u8]| String::from_utf8_lossy(received).contains(needle);
        let wait = async {
            while !found(&self.received) {
                let read = self.stream.read(&mut buffer).await.expect("reading");
                assert!(read > 0, "the server closed before sending {needle:?}");
                self.received.extend_from_slice(&buffer[..read]);
            }
        };
        tokio::time::timeout(PATIENCE, wait)
            .await
            .unwrap_or_else(|_| panic!("no {needle:?} from the server"));
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.received).into_owned()
    }
}

/// A hyper `Timer` whose clock runs [`CompressedTimer::SPEEDUP`] times faster
/// than real time, so a 30 s default shows in 0.3 s; it notes each timeout
/// hyper asks for, in its own time.
#[derive(Clone)]
pub struct CompressedTimer {
    started: Instant,
    /// The last `now()` handed to hyper: hyper's deadline is `now()` plus its
    /// timeout, so the deadline minus this is the timeout it asked for.
    last_now: Arc<Mutex<Instant>>,
    asked: Arc<Mutex<Vec<Duration>>>,
}

impl Default for CompressedTimer {
    fn default() -> CompressedTimer {
        let started = Instant::now();
        CompressedTimer {
            started,
            last_now: Arc::new(Mutex::new(started)),
            asked: Arc::default(),
        }
    }
}

impl CompressedTimer {
    pub const SPEEDUP: u32 = 100;

    /// Every timeout hyper asked this timer for, in compressed time.
    pub fn asked(&self) -> Vec<Duration> {
        self.asked.lock().expect("not poisoned").clone()
    }

    /// A real duration in the timer's compressed time.
    pub fn compressed(real: Duration) -> Duration {
        real * Self::SPEEDUP
    }
}

struct CompressedSleep(Pin<Box<tokio::time::Sleep>>);

impl Future for CompressedSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(context)
    }
}

impl hyper::rt::Sleep for CompressedSleep {}

impl hyper::rt::Timer for CompressedTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.asked.lock().expect("not poisoned").push(duration);
        Box::pin(CompressedSleep(Box::pin(tokio::time::sleep(
            duration / Self::SPEEDUP,
        ))))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        let asked_at = *self.last_now.lock().expect("not poisoned");
        self.asked
            .lock()
            .expect("not poisoned")
            .push(deadline.saturating_duration_since(asked_at));
        let remaining = deadline.saturating_duration_since(self.now());
        Box::pin(CompressedSleep(Box::pin(tokio::time::sleep(
            remaining / Self::SPEEDUP,
        ))))
    }

    fn now(&self) -> Instant {
        let now = self.started + self.started.elapsed() * Self::SPEEDUP;
        *self.last_now.lock().expect("not poisoned") = now;
        now
    }
}

/// TCP options of one socket, as `getsockopt` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpOptions {
    pub keepalive: bool,
    pub keepalive_idle_s: i64,
    pub keepalive_interval_s: i64,
    pub keepalive_probes: i64,
    pub user_timeout_ms: i64,
    pub nodelay: bool,
}

fn int_sockopt(fd: i32, level: i32, name: i32) -> i64 {
    let mut value: libc::c_int = 0;
    let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` is a writable c_int and `length` says so; the kernel
    // writes at most that many bytes, or fails without writing.
    let status = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut length,
        )
    };
    if status == 0 { i64::from(value) } else { -1 }
}

/// The options of this process's socket connected to `peer` (a client's
/// connection, which the library under test opened and keeps to itself).
pub fn tcp_options_toward(peer: SocketAddr) -> Option<TcpOptions> {
    let entries = std::fs::read_dir("/proc/self/fd").expect("listing /proc/self/fd");
    for entry in entries.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse().ok())
        else {
            continue;
        };
        // SAFETY: the descriptor stays open while we look (the library holds
        // it) and ManuallyDrop keeps this borrowed view from closing it; on a
        // descriptor that is not a socket `peer_addr` fails harmlessly.
        let view = ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(fd) });
        if view.peer_addr().ok() != Some(peer) {
            continue;
        }
        return Some(TcpOptions {
            keepalive: int_sockopt(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE) == 1,
            keepalive_idle_s: int_sockopt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE),
            keepalive_interval_s: int_sockopt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL),
            keepalive_probes: int_sockopt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT),
            user_timeout_ms: int_sockopt(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT),
            nodelay: int_sockopt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY) == 1,
        });
    }
    None
}

/// A listener whose accept queue is full and never drained: the kernel drops
/// every further SYN, so a connect to it hangs, as to a host that is down.
pub struct SilentListener {
    pub addr: SocketAddr,
    _listener: tokio::net::TcpListener,
    _fillers: Vec<TcpStream>,
}

impl SilentListener {
    /// On `addr` (port 0 for any): a queue of one, filled.
    pub async fn bind(addr: SocketAddr) -> std::io::Result<SilentListener> {
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        socket.bind(addr)?;
        let listener = socket.listen(0)?;
        let addr = listener.local_addr()?;
        let mut fillers = Vec::new();
        // A backlog of 0 still queues one or two connections; connect until
        // one hangs, which proves the queue is full.
        for _ in 0..8 {
            match tokio::time::timeout(Duration::from_millis(300), TcpStream::connect(addr)).await {
                Ok(Ok(filler)) => fillers.push(filler),
                Ok(Err(error)) => return Err(error),
                Err(_) => {
                    return Ok(SilentListener {
                        addr,
                        _listener: listener,
                        _fillers: fillers,
                    });
                }
            }
        }
        Err(std::io::Error::other(
            "the listener kept accepting connects",
        ))
    }
}
