//! A tunnel hop: a TCP forwarder between a client and its upstream, like a
//! cloud tunnel or a sidecar. When the upstream behind it dies, it keeps the
//! client's connection open and swallows what the client sends, so the
//! client sees neither a close nor a reset: only silence.
//!
//! It counts the connections it accepts: the ground truth for "was that
//! request sent on a reused connection?".

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::{Context, Result};
use lab_kit::net::{AbortOnDrop, bind_loopback, spawn_accept_loop};
use tokio::net::TcpStream;

/// A running tunnel. Dropping it closes every connection it holds.
pub struct Tunnel {
    pub addr: SocketAddr,
    accepted: Arc<AtomicU64>,
    target: Arc<Mutex<SocketAddr>>,
    _server: AbortOnDrop,
}

impl Tunnel {
    /// Starts a tunnel on 127.0.0.1, port 0, toward `target`.
    pub async fn start(target: SocketAddr) -> Result<Tunnel> {
        let listener = bind_loopback().await.context("starting the tunnel")?;
        let addr = listener
            .local_addr()
            .context("reading the tunnel's address")?;
        let accepted = Arc::new(AtomicU64::new(0));
        let target = Arc::new(Mutex::new(target));
        let (counter, current) = (Arc::clone(&accepted), Arc::clone(&target));
        let server = spawn_accept_loop(listener, move |client, _peer| {
            counter.fetch_add(1, Ordering::SeqCst);
            let upstream = *current.lock().expect("the target lock is never poisoned");
            relay(client, upstream)
        });
        Ok(Tunnel {
            addr,
            accepted,
            target,
            _server: server,
        })
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Connections accepted from clients so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Where new client connections are forwarded from now on (an upstream
    /// that restarted on a new port).
    pub fn retarget(&self, target: SocketAddr) {
        *self
            .target
            .lock()
            .expect("the target lock is never poisoned") = target;
    }
}

// ANCHOR: relay
/// One client connection. Bytes flow both ways while the upstream lives; once
/// it closes (or cannot be reached), the client's side stays open and
/// everything the client sends is read and dropped.
async fn relay(client: TcpStream, target: SocketAddr) {
    let (mut client_read, mut client_write) = client.into_split();
    if let Ok(upstream) = TcpStream::connect(target).await {
        let (mut upstream_read, mut upstream_write) = upstream.into_split();
        tokio::select! {
            // The upstream died: fall through to swallowing.
            _ = tokio::io::copy(&mut upstream_read, &mut client_write) => {}
            // The client left: nothing more to do.
            _ = tokio::io::copy(&mut client_read, &mut upstream_write) => return,
        }
    }
    // `client_write` is still alive here, so no FIN reaches the client.
    let _ = tokio::io::copy(&mut client_read, &mut tokio::io::sink()).await;
    drop(client_write);
}
// ANCHOR_END: relay
