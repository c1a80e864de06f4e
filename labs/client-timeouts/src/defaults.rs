//! The defaults of the Rust client stack, measured rather than copied: what
//! a default `reqwest::Client` and a default hyper-util legacy client do
//! with a downstream that never completes the handshake and one that never
//! answers, the TCP options the kernel reports on their sockets, whether an
//! idle pooled connection survives a while, and how the pool's idle timeout
//! behaves with and without a timer.

use std::{
    net::{Ipv4Addr, SocketAddr},
    time::Duration,
};

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::{
    client::legacy::Client as LegacyClient,
    rt::{TokioExecutor, TokioTimer},
};
use lab_kit::Output;
use serde::Serialize;
use tokio::time::Instant;

use crate::{
    Config,
    downstream::{Downstream, Shape},
    millis,
};

/// One client's defaults, as the lab saw them.
#[derive(Debug, Clone, Serialize)]
pub struct Defaults {
    /// Against a downstream that never completes the handshake, and one that
    /// reads the request and never answers: the outcome within the bound.
    pub no_handshake: String,
    pub silent: String,
    /// How long the lab waited, in real seconds (not compressed: these are
    /// the libraries' own defaults).
    pub bound_s: f64,
    /// TCP options on the client's socket, as `getsockopt` reports them.
    pub so_keepalive: bool,
    pub keepalive_idle_s: i64,
    pub keepalive_interval_s: i64,
    pub keepalive_probes: i64,
    pub user_timeout_ms: i64,
    pub nodelay: bool,
    /// An idle pooled connection was still open this long after its request.
    pub idle_still_open: bool,
    pub idle_watch_s: f64,
}

/// A pool idle timeout set short, to see when the pool really closes.
#[derive(Debug, Clone, Serialize)]
pub struct PoolReaper {
    pub pool_idle_timeout_ms: f64,
    /// When the downstream saw the idle connection close, counted from the
    /// end of the response; or still open at the end of the watch.
    pub closed: bool,
    pub closed_after_ms: f64,
    pub watch_ms: f64,
}

/// Kernel socket options of the client socket connected to `peer`.
#[derive(Debug, Clone, Copy, Default)]
struct SocketOptions {
    keepalive: bool,
    idle_s: i64,
    interval_s: i64,
    probes: i64,
    user_timeout_ms: i64,
    nodelay: bool,
}

/// The peer of a file descriptor, if it is a connected IPv4 socket.
fn peer_of(fd: i32) -> Option<SocketAddr> {
    // SAFETY: an all-zero sockaddr_storage is a valid value of that type.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut length = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `storage` is writable and `length` says how big it is;
    // getpeername writes at most that many bytes, and on a descriptor that
    // is not a connected socket it fails without writing.
    let status = unsafe {
        libc::getpeername(
            fd,
            (&mut storage as *mut libc::sockaddr_storage).cast(),
            &mut length,
        )
    };
    if status != 0 || i32::from(storage.ss_family) != libc::AF_INET {
        return None;
    }
    // SAFETY: the family is AF_INET, so the storage holds a sockaddr_in.
    let address =
        unsafe { &*(&storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
    let ip = Ipv4Addr::from(u32::from_be(address.sin_addr.s_addr));
    Some(SocketAddr::from((ip, u16::from_be(address.sin_port))))
}

/// One integer socket option, or -1 if the kernel refuses to say.
fn int_option(fd: i32, level: i32, name: i32) -> i64 {
    let mut value: libc::c_int = 0;
    let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` is a writable c_int and `length` is its size.
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

/// This process's socket connected to `peer`, if it has one.
pub(crate) fn fd_toward(peer: SocketAddr) -> Result<Option<i32>> {
    for entry in std::fs::read_dir("/proc/self/fd").context("listing /proc/self/fd")? {
        let Some(fd) = entry.ok().and_then(|entry| {
            entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse().ok())
        }) else {
            continue;
        };
        if peer_of(fd) == Some(peer) {
            return Ok(Some(fd));
        }
    }
    Ok(None)
}

/// The kernel's TCP_INFO for a socket: segments received so far and
/// milliseconds since the last ACK arrived.
pub(crate) fn segments_and_last_ack(fd: i32) -> Option<(u32, u32)> {
    let info = lab_kit::procnet::tcp_info(fd).ok()?;
    Some((info.tcpi_segs_in, info.tcpi_last_ack_recv))
}

/// Finds this process's socket connected to `peer` and reads its options.
fn options_toward(peer: SocketAddr) -> Result<SocketOptions> {
    let fd = fd_toward(peer)?
        .with_context(|| format!("no socket of this process is connected to {peer}"))?;
    Ok(SocketOptions {
        keepalive: int_option(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE) == 1,
        idle_s: int_option(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE),
        interval_s: int_option(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL),
        probes: int_option(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT),
        user_timeout_ms: int_option(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT),
        nodelay: int_option(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY) == 1,
    })
}

/// The two clients, behind one interface: one GET, body read to the end.
enum Which {
    Reqwest(reqwest::Client),
    Legacy(Box<LegacyClient<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>>),
}

impl Which {
    async fn get(&self, url: &str) -> Result<()> {
        match self {
            Which::Reqwest(client) => {
                client.get(url).send().await?.bytes().await?;
            }
            Which::Legacy(client) => {
                let request = http::Request::get(url).body(Empty::new())?;
                client.request(request).await?.into_body().collect().await?;
            }
        }
        Ok(())
    }
}

fn legacy(idle: Option<Duration>, timer: bool) -> Which {
    let mut builder = LegacyClient::builder(TokioExecutor::new());
    if let Some(idle) = idle {
        builder.pool_idle_timeout(idle);
    }
    if timer {
        builder.pool_timer(TokioTimer::new());
    }
    Which::Legacy(Box::new(builder.build_http()))
}

/// The outcome of one GET against `shape`, within `bound`.
async fn outcome_against(
    client: &Which,
    shape: Shape,
    config: &Config,
    bound: Duration,
) -> Result<String> {
    let downstream = Downstream::start(shape, config.behaviour()).await?;
    let started = Instant::now();
    Ok(
        match tokio::time::timeout(bound, client.get(&downstream.url("/"))).await {
            Ok(Ok(())) => "answered".to_string(),
            Ok(Err(error)) => format!(
                "failed after {:.2} s: {error:#}",
                started.elapsed().as_secs_f64()
            ),
            Err(_) => format!("still waiting at {:.1} s", bound.as_secs_f64()),
        },
    )
}

/// One client's defaults.
async fn measure(client: Which, config: &Config) -> Result<Defaults> {
    let bound = Duration::from_secs_f64(config.defaults_bound_real_s);
    let idle_check = async {
        let normal = Downstream::start(Shape::Normal, config.behaviour()).await?;
        client
            .get(&normal.url("/"))
            .await
            .context("a GET to a normal downstream")?;
        let options = options_toward(normal.addr)?;
        tokio::time::sleep(bound).await;
        anyhow::Ok((options, normal.open() == 1))
    };
    let (no_handshake, silent, (options, idle_still_open)) = tokio::try_join!(
        outcome_against(&client, Shape::NoHandshake, config, bound),
        outcome_against(&client, Shape::Silent, config, bound),
        idle_check,
    )?;
    Ok(Defaults {
        no_handshake,
        silent,
        bound_s: bound.as_secs_f64(),
        so_keepalive: options.keepalive,
        keepalive_idle_s: options.idle_s,
        keepalive_interval_s: options.interval_s,
        keepalive_probes: options.probes,
        user_timeout_ms: options.user_timeout_ms,
        nodelay: options.nodelay,
        idle_still_open,
        idle_watch_s: bound.as_secs_f64(),
    })
}

/// When a pool with a short idle timeout really closes an idle connection.
async fn reaper(client: Which, idle: Duration) -> Result<PoolReaper> {
    let normal = Downstream::start(
        Shape::Normal,
        crate::downstream::Behaviour {
            body_bytes: 16,
            trickle_every: Duration::ZERO,
        },
    )
    .await?;
    client
        .get(&normal.url("/"))
        .await
        .context("a GET to a normal downstream")?;
    let idle_since = Instant::now();
    let watch = idle * 5;
    while normal.open() > 0 && idle_since.elapsed() < watch {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let closed = normal.open() == 0;
    Ok(PoolReaper {
        pool_idle_timeout_ms: millis(idle),
        closed,
        closed_after_ms: millis(idle_since.elapsed()),
        watch_ms: millis(watch),
    })
}

/// Every measurement, side by side; summaries `defaults/<client>` and
/// `reaper/<client>`.
pub async fn run_defaults(config: &Config, out: &mut Output) -> Result<()> {
    let idle = config.lab(config.pool_idle_probe_s);
    let reqwest_default = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("building a default reqwest client")?;
    let reqwest_short = reqwest::Client::builder()
        .no_proxy()
        .pool_idle_timeout(idle)
        .build()
        .context("building a reqwest client")?;
    let (reqwest_defaults, legacy_defaults, reqwest_reaper, legacy_no_timer, legacy_timer) = tokio::try_join!(
        measure(Which::Reqwest(reqwest_default), config),
        measure(legacy(None, false), config),
        reaper(Which::Reqwest(reqwest_short), idle),
        reaper(legacy(Some(idle), false), idle),
        reaper(legacy(Some(idle), true), idle),
    )?;
    out.write_summary("defaults/reqwest", &reqwest_defaults)?;
    out.write_summary("defaults/hyper-util-legacy", &legacy_defaults)?;
    out.write_summary("reaper/reqwest", &reqwest_reaper)?;
    out.write_summary("reaper/hyper-util-legacy-no-timer", &legacy_no_timer)?;
    out.write_summary("reaper/hyper-util-legacy-timer", &legacy_timer)?;
    Ok(())
}
