//! # Exercise: a server that waits for ever for a request head
//!
//! This service faces the internet with nothing in front of it. Its config
//! has a `head_timeout` (20 s in production): a client gets that long to send
//! a complete request head. A slowloris client sends half a head and then
//! nothing, one connection after another, until the process runs out of file
//! descriptors.
//!
//! Verify: `cargo xtask exercise verify server-timeouts-slow-head`.

use std::{io, time::Duration};

use axum::Router;
use tokio::net::TcpListener;

/// Serves `app` on `listener` until the listener fails.
pub async fn serve(listener: TcpListener, app: Router, _head_timeout: Duration) -> io::Result<()> {
    // TODO: `axum::serve` takes no `head_timeout`. What does it do with a
    // connection that sent half a request head, and what must serve each
    // connection instead so that hyper's header read timeout really runs?
    axum::serve(listener, app).await
}
