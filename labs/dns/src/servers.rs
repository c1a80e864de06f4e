//! The HTTP servers the lab's clients talk to: an axum app on a listener the
//! lab bound (127.0.0.1, 127.0.0.2 or [::1], on a port it chose) that answers
//! with its own label and counts what it served.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use anyhow::{Context, Result};
use axum::{Router, routing::get};
use lab_kit::net::AbortOnDrop;
use tokio::net::TcpListener;

/// A server that answers every GET with its label; dropping it stops it and
/// closes its connections.
pub struct LabeledServer {
    pub addr: SocketAddr,
    pub label: &'static str,
    served: Arc<AtomicUsize>,
    _task: AbortOnDrop,
}

impl LabeledServer {
    pub fn serve(listener: TcpListener, label: &'static str) -> Result<LabeledServer> {
        let addr = listener.local_addr().context("reading the bound address")?;
        let served = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&served);
        let app = Router::new().route(
            "/",
            get(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                async move { label }
            }),
        );
        let task = AbortOnDrop::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(LabeledServer {
            addr,
            label,
            served,
            _task: task,
        })
    }

    /// Binds `ip` on `port` (0: the kernel picks) and serves there.
    pub async fn bind(
        ip: std::net::IpAddr,
        port: u16,
        label: &'static str,
    ) -> Result<LabeledServer> {
        let listener = TcpListener::bind((ip, port))
            .await
            .with_context(|| format!("binding {}", SocketAddr::new(ip, port)))?;
        LabeledServer::serve(listener, label)
    }

    pub fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }
}

/// Binds the same port on two addresses: `first` on a port the kernel
/// picks, then `second(port)`, retried with a new port when something else
/// already holds that port on the second address.
pub async fn same_port<T>(
    first: std::net::IpAddr,
    mut second: impl FnMut(u16) -> std::io::Result<T>,
) -> Result<(TcpListener, T)> {
    let mut last_error = None;
    for _ in 0..20 {
        let one = TcpListener::bind((first, 0))
            .await
            .with_context(|| format!("binding {first}:0"))?;
        let port = one.local_addr()?.port();
        match second(port) {
            Ok(two) => return Ok((one, two)),
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.map_or_else(
        || anyhow::anyhow!("no port free on both addresses"),
        |error| {
            anyhow::Error::new(error).context(format!("binding the second address beside {first}"))
        },
    ))
}

/// A std listener turned into tokio's, for `same_port`'s second address.
pub fn std_listener(address: SocketAddr) -> std::io::Result<TcpListener> {
    let listener = std::net::TcpListener::bind(address)?;
    listener.set_nonblocking(true)?;
    TcpListener::from_std(listener)
}

/// A server on 127.0.0.1 that answers `GET /` with `ok`: what a lookup's
/// request goes to when only the lookup is measured.
pub async fn ok_server() -> Result<lab_kit::server::RunningServer> {
    lab_kit::server::spawn_axum(Router::new().route("/", get(|| async { "ok" }))).await
}
