//! A link-delay shim to put between a balancer and its backend: a TCP relay
//! that delays every byte, and every close, by a fixed one-way delay.
//!
//! On loopback a FIN arrives in microseconds, so the race between a FIN and a
//! new request almost never happens; with the shim it happens whenever a
//! request leaves within one round trip of the backend closing, as it does
//! across a real network.
//!
//! Simplification: a reset on one side of the shim is passed on as a close.

use std::{
    net::SocketAddr,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use lab_kit::net::{AbortOnDrop, bind_loopback, spawn_accept_loop};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{
        TcpStream,
        tcp::{OwnedReadHalf, OwnedWriteHalf},
    },
    sync::mpsc,
};

/// A TCP relay that delays each direction by `one_way` delay: bytes, and the
/// close that follows them, arrive `one_way` after they were sent.
pub struct LinkDelay {
    pub addr: SocketAddr,
    _task: AbortOnDrop,
}

enum Segment {
    Bytes(Vec<u8>),
    /// The sender closed (or reset) its side.
    Close,
}

impl LinkDelay {
    /// Listens on 127.0.0.1:0; every connection to it is relayed to `upstream`.
    pub async fn spawn(upstream: SocketAddr, one_way: Duration) -> Result<LinkDelay> {
        let listener = bind_loopback().await?;
        let addr = listener
            .local_addr()
            .context("reading the shim's address")?;
        let task = spawn_accept_loop(listener, move |downstream, _peer| async move {
            let Ok(upstream) = TcpStream::connect(upstream).await else {
                return;
            };
            let _ = upstream.set_nodelay(true);
            let (down_read, down_write) = downstream.into_split();
            let (up_read, up_write) = upstream.into_split();
            tokio::join!(
                relay(down_read, up_write, one_way),
                relay(up_read, down_write, one_way)
            );
        });
        Ok(LinkDelay { addr, _task: task })
    }
}

/// One direction of the shim: a reader stamps each segment with the moment
/// it must be delivered, a writer delivers it then. The reader never waits
/// for the writer, so the delay is a delay, not a throughput limit.
async fn relay(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, one_way: Duration) {
    let (sender, mut receiver) = mpsc::unbounded_channel::<(Instant, Segment)>();
    let reader = async move {
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            let segment = match from.read(&mut chunk).await {
                Ok(0) | Err(_) => Segment::Close,
                Ok(count) => Segment::Bytes(chunk[..count].to_vec()),
            };
            let closing = matches!(segment, Segment::Close);
            if sender.send((Instant::now() + one_way, segment)).is_err() || closing {
                return;
            }
        }
    };
    let writer = async move {
        while let Some((due, segment)) = receiver.recv().await {
            tokio::time::sleep_until(due.into()).await;
            match segment {
                Segment::Bytes(bytes) => {
                    if to.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                Segment::Close => {
                    let _ = to.shutdown().await;
                    return;
                }
            }
        }
    };
    tokio::join!(reader, writer);
}
