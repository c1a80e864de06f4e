//! The server the doctor examines ([`Patient`]), as every check needs it:
//! where it is, what the reader asked, how to connect (plain, TLS, HTTP/2),
//! and the reader's command started ([`start`]). Below the checks, which
//! all take one: the HTTP/1.1 checks (`checks`) and the HTTP/2 ones (`h2`).

use std::{net::SocketAddr, process::Stdio, time::Duration};

use anyhow::{Context, Result, bail};
use lab_kit::{child::ChildGuard, conn::Connector, fetch::Fetcher};
use lab_shutdown_drain::probe::wait_until_listening;

use crate::options::Options;

/// The server the doctor examines, as every check needs it: where it is and
/// what the reader asked. ("Probe" is kept for the requests a check sends.)
#[derive(Debug, Clone)]
pub struct Patient {
    pub addr: SocketAddr,
    /// The `Host` header: the target as typed.
    pub host: String,
    pub options: Options,
    /// How a check that opens its own socket connects: plain, or TLS.
    pub connector: Connector,
    /// How the HTTP/2 checks connect (TLS with ALPN h2, or plain with
    /// `--h2c`), where they can.
    pub h2: Option<Connector>,
}

impl Patient {
    /// A server on `addr` over plain TCP, its `Host` the address.
    pub fn plain(addr: SocketAddr, options: Options) -> Patient {
        Patient {
            addr,
            host: addr.to_string(),
            options,
            connector: Connector::Plain,
            h2: None,
        }
    }

    /// The URL of `path` for [`Patient::client`]'s requests. Over TLS its
    /// host is the target as typed, for the `Host` header (the connection
    /// goes to `addr` whatever the URL says); over plain TCP the address,
    /// so reqwest looks nothing up.
    pub fn url(&self, path: &str) -> String {
        if self.connector.is_tls() {
            format!("http://{}{path}", self.host)
        } else {
            format!("http://{}{path}", self.addr)
        }
    }

    /// A host that is not loopback (`--allow-remote`): the load checks keep
    /// to a polite, bounded rate.
    pub fn remote(&self) -> bool {
        !self.addr.ip().is_loopback()
    }

    /// A keep-alive client, as a service's own would be.
    pub fn client(&self) -> Result<Fetcher> {
        if self.connector.is_tls() {
            return Ok(Fetcher::tls(self.connector.clone(), self.addr, true));
        }
        let client = reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(1024)
            .build()
            .context("building the HTTP client")?;
        Ok(Fetcher::Reqwest(client))
    }

    /// A client whose every request opens a connection of its own.
    pub fn fresh_client(&self) -> Result<Fetcher> {
        if self.connector.is_tls() {
            return Ok(Fetcher::tls(self.connector.clone(), self.addr, false));
        }
        let client = lab_kit::client::fresh_connection_client("a burst client")?;
        Ok(Fetcher::Reqwest(client))
    }
}

/// Starts the reader's command and waits until it listens on its port.
pub async fn start(port: u16, command: &[String]) -> Result<ChildGuard> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    if tokio::net::TcpStream::connect(addr).await.is_ok() {
        bail!("something already listens on {addr}: stop it, or pick another --port");
    }
    let mut child = ChildGuard::spawn(&command[0], &command[1..], Stdio::null())
        .with_context(|| format!("starting {:?}", command.join(" ")))?;
    wait_until_listening(&mut child, addr, Duration::from_secs(10)).await?;
    Ok(child)
}
