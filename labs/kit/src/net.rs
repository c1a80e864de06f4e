//! The loopback plumbing every lab's servers share: a port the kernel picks on
//! 127.0.0.1, a task that stops when its owner is dropped, and an accept loop
//! whose connections die with it.

use std::{future::Future, net::SocketAddr, time::Duration};

use anyhow::{Context, Result};
use tokio::{
    net::{TcpListener, TcpStream},
    task::{JoinHandle, JoinSet},
};

/// Binds 127.0.0.1 on a port the kernel picks.
pub async fn bind_loopback() -> Result<TcpListener> {
    TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .await
        .context("binding 127.0.0.1:0")
}

/// A loopback port that refuses every connection for as long as this lives:
/// a socket is bound to it and never listens. Linux answers a SYN there with
/// a reset, and gives the port to no other socket (a kernel-chosen port skips
/// it, and an explicit bind conflicts, since this socket lacks
/// `SO_REUSEADDR`). For the "closed port" case of a test or a lab part.
///
/// A port that was bound and then closed is not that: the batch's other
/// tests bind ports all the time, and one of them could be given it before
/// the "closed" port is tried, which then reaches that test's server (seen:
/// a check meant to be refused passed, and a server's drain waited on a
/// stranger's connection).
#[derive(Debug)]
pub struct ClosedPort {
    _bound: tokio::net::TcpSocket,
    port: u16,
}

impl ClosedPort {
    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, self.port))
    }
}

/// See [`ClosedPort`]; keep it alive while the port is used.
pub fn closed_loopback_port() -> Result<ClosedPort> {
    let socket = tokio::net::TcpSocket::new_v4().context("creating a socket")?;
    socket
        .bind(SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)))
        .context("binding 127.0.0.1:0")?;
    let port = socket
        .local_addr()
        .context("reading the bound address")?
        .port();
    Ok(ClosedPort {
        _bound: socket,
        port,
    })
}

/// A loopback port that was free a moment ago, for a server started later
/// on a port given to it (a child process's `--port`): bound by the kernel's
/// choice, then closed. Another socket may take it in between; then the
/// server's bind fails, or the caller's check that nothing listens there
/// does, with an error that says so.
pub fn free_loopback_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .context("binding 127.0.0.1:0")?;
    Ok(listener
        .local_addr()
        .context("reading the bound address")?
        .port())
}

/// Connects to `addr` and sends one `GET path` with `Connection: close` on a
/// raw socket, so that every byte the server sends back can be read as it is.
pub async fn send_raw_get(addr: SocketAddr, path: &str) -> Result<TcpStream> {
    use tokio::io::AsyncWriteExt;
    let mut stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    let request = format!("GET {path} HTTP/1.1\r\nhost: lab\r\nconnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .with_context(|| format!("sending GET {path} to {addr}"))?;
    Ok(stream)
}

/// An I/O error that means the peer reset or dropped the connection
/// (`ECONNRESET`, `EPIPE`, `ECONNABORTED`), not a failure of this side.
pub fn is_reset(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    matches!(
        error.kind(),
        ConnectionReset | BrokenPipe | ConnectionAborted
    )
}

/// A spawned task that is aborted when this guard is dropped, so a server or a
/// client loop lives exactly as long as the value that owns it.
#[must_use = "dropping the guard aborts the task at once"]
pub struct AbortOnDrop<T = ()>(JoinHandle<T>);

impl<T: Send + 'static> AbortOnDrop<T> {
    /// Spawns `future` on the current runtime.
    pub fn spawn(future: impl Future<Output = T> + Send + 'static) -> AbortOnDrop<T> {
        AbortOnDrop(tokio::spawn(future))
    }

    /// Waits for the task to end, at most `bound`; past it the task is aborted
    /// and `None` comes back.
    pub async fn join_within(mut self, bound: Duration) -> Option<T> {
        match tokio::time::timeout(bound, &mut self.0).await {
            Ok(Ok(value)) => Some(value),
            _ => None,
        }
    }
}

impl<T> From<JoinHandle<T>> for AbortOnDrop<T> {
    fn from(handle: JoinHandle<T>) -> Self {
        AbortOnDrop(handle)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Accepts connections on `listener` until the returned guard is dropped and
/// hands each (with `TCP_NODELAY` set) to `serve`. The connection tasks live in
/// a set owned by the accept task, so dropping the guard closes every one.
/// A failed accept (out of file descriptors, say) is retried after 5 ms.
pub fn spawn_accept_loop<F, Fut>(listener: TcpListener, mut serve: F) -> AbortOnDrop
where
    F: FnMut(TcpStream, SocketAddr) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    AbortOnDrop::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    while connections.try_join_next().is_some() {}
                    connections.spawn(serve(stream, peer));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn dropping_the_accept_loop_closes_its_connections() {
        let listener = bind_loopback().await.unwrap();
        let addr = listener.local_addr().unwrap();
        assert!(addr.ip().is_loopback());
        let served = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&served);
        let server = spawn_accept_loop(listener, move |mut stream, _peer| {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                let _ = stream.write_all(b"hi").await;
                // Hold the connection open until aborted.
                std::future::pending::<()>().await;
            }
        });
        let mut client = TcpStream::connect(addr).await.unwrap();
        let mut greeting = [0u8; 2];
        client.read_exact(&mut greeting).await.unwrap();
        assert_eq!(&greeting, b"hi");
        assert_eq!(served.load(Ordering::SeqCst), 1);
        drop(server);
        // The connection task was aborted with the loop: the socket closes and
        // the client reads end of stream, not a hang.
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut rest))
            .await
            .expect("the connection outlived its accept loop");
        assert_eq!(read.unwrap(), 0);
        // And the port no longer accepts.
        assert!(TcpStream::connect(addr).await.is_err());
    }

    #[tokio::test]
    async fn a_closed_port_refuses_and_is_given_to_no_one_else() {
        let closed = closed_loopback_port().unwrap();
        let refused = TcpStream::connect(closed.addr()).await.unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        // A listener asking for that very port is refused it (std and tokio
        // set SO_REUSEADDR; the closed port's socket does not).
        assert!(std::net::TcpListener::bind(closed.addr()).is_err());
        assert!(TcpListener::bind(closed.addr()).await.is_err());
        // Still refusing after a thousand kernel-chosen ports.
        let others: Vec<_> = (0..1000)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        assert!(
            others
                .iter()
                .all(|other| other.local_addr().unwrap().port() != closed.port())
        );
        assert!(TcpStream::connect(closed.addr()).await.is_err());
        // Dropped, the port is free again.
        let port = closed.port();
        drop(closed);
        assert!(std::net::TcpListener::bind(("127.0.0.1", port)).is_ok());
    }

    #[tokio::test]
    async fn join_within_aborts_a_task_past_its_bound() {
        let quick = AbortOnDrop::spawn(async { 7 });
        assert_eq!(quick.join_within(Duration::from_secs(5)).await, Some(7));
        let stuck = AbortOnDrop::spawn(std::future::pending::<u8>());
        assert_eq!(stuck.join_within(Duration::from_millis(20)).await, None);
    }
}
