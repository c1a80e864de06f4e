//! The resolvers the lab hands to reqwest's `dns_resolver` hook: a wrapper
//! that counts calls and can be slowed down, fixed answers in a fixed order
//! (so the address-family part holds on any machine, whatever its
//! /etc/hosts says about `localhost`), reqwest's own default (getaddrinfo on
//! tokio's blocking pool) and hickory-resolver pointed at the lab's DNS
//! server.

use std::{
    net::{IpAddr, SocketAddr},
    str::FromStr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use anyhow::Result;
use hickory_resolver::{
    TokioResolver,
    config::{ConnectionConfig, NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts},
    net::runtime::TokioRuntimeProvider,
    proto::rr::Name as DnsName,
};
use hyper_util::client::legacy::connect::dns::{GaiResolver, Name as HyperName};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use tower_service::Service;

// ANCHOR: counting
/// Wraps any resolver: counts every call reqwest makes and waits `delay`
/// before each one, as a slow DNS server would.
pub struct CountingResolver {
    inner: Arc<dyn Resolve>,
    delay: Duration,
    calls: Arc<AtomicUsize>,
}

impl CountingResolver {
    pub fn new(inner: Arc<dyn Resolve>, delay: Duration) -> CountingResolver {
        CountingResolver {
            inner,
            delay,
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The counter, to read after the resolver has moved into a client.
    pub fn calls(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.calls)
    }
}

impl Resolve for CountingResolver {
    fn resolve(&self, name: Name) -> Resolving {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let inner = Arc::clone(&self.inner);
        let delay = self.delay;
        Box::pin(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            inner.resolve(name).await
        })
    }
}
// ANCHOR_END: counting

// ANCHOR: fixed
/// Answers every name with the same addresses, in this order: what a
/// resolver returns for `localhost` on a machine whose /etc/hosts lists
/// `::1` before `127.0.0.1`, on any machine.
pub struct FixedAnswers(pub Vec<IpAddr>);

impl Resolve for FixedAnswers {
    fn resolve(&self, _name: Name) -> Resolving {
        // Port 0: reqwest puts the URL's port in.
        let addresses: Vec<SocketAddr> = self
            .0
            .iter()
            .map(|address| SocketAddr::new(*address, 0))
            .collect();
        Box::pin(async move { Ok(Box::new(addresses.into_iter()) as Addrs) })
    }
}
// ANCHOR_END: fixed

/// reqwest's default resolver, written out: reqwest 0.13's own `GaiResolver`
/// (private) is this same thin wrapper around hyper-util's, which runs
/// `getaddrinfo` in `tokio::task::spawn_blocking`.
#[derive(Clone)]
pub struct Getaddrinfo(GaiResolver);

impl Default for Getaddrinfo {
    fn default() -> Getaddrinfo {
        Getaddrinfo(GaiResolver::new())
    }
}

impl Resolve for Getaddrinfo {
    fn resolve(&self, name: Name) -> Resolving {
        let mut gai = self.0.clone();
        let parsed = HyperName::from_str(name.as_str());
        Box::pin(async move {
            let addresses = gai.call(parsed?).await?;
            Ok(Box::new(addresses) as Addrs)
        })
    }
}

/// How a [`LabResolver`] is set up.
#[derive(Debug, Clone)]
pub struct StubSettings {
    /// The lab's DNS server.
    pub server: SocketAddr,
    /// Search domains, tried in order for a name with fewer than `ndots` dots.
    pub search: Vec<String>,
    pub ndots: usize,
    /// hickory-resolver's response cache (which honours each answer's TTL).
    pub cache: bool,
}

impl StubSettings {
    /// A stub with no search domains (`ndots` 1) and its cache on: what a
    /// service that asks for full names gets.
    pub fn plain(server: SocketAddr) -> StubSettings {
        StubSettings {
            server,
            search: Vec::new(),
            ndots: 1,
            cache: true,
        }
    }
}

// ANCHOR: hickory
/// hickory-resolver pointed at the lab's DNS server, behind reqwest's hook.
/// reqwest's own `hickory-dns` feature cannot do this: it builds its
/// resolver from /etc/resolv.conf, with no way to pass a name server.
#[derive(Clone)]
pub struct LabResolver(TokioResolver);

impl LabResolver {
    pub fn new(settings: &StubSettings) -> Result<LabResolver> {
        let mut udp = ConnectionConfig::udp();
        udp.port = settings.server.port();
        let mut server = NameServerConfig::udp(settings.server.ip());
        server.connections = vec![udp];
        let search = settings
            .search
            .iter()
            .map(|domain| DnsName::from_str(domain))
            .collect::<Result<Vec<_>, _>>()?;
        let config = ResolverConfig::from_parts(None, search, vec![server]);
        let mut options = ResolverOpts::default();
        options.ndots = settings.ndots;
        options.use_hosts_file = ResolveHosts::Never; // only the lab's server answers
        options.timeout = Duration::from_secs(2);
        if !settings.cache {
            options.cache_size = 0;
        }
        let resolver = TokioResolver::builder_with_config(config, TokioRuntimeProvider::default())
            .with_options(options)
            .build()?;
        Ok(LabResolver(resolver))
    }
}

impl Resolve for LabResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let resolver = self.0.clone();
        Box::pin(async move {
            let found = resolver.lookup_ip(name.as_str()).await?;
            let addresses: Vec<SocketAddr> = found
                .iter()
                .map(|address| SocketAddr::new(address, 0))
                .collect();
            Ok(Box::new(addresses.into_iter()) as Addrs)
        })
    }
}
// ANCHOR_END: hickory

/// hickory-resolver's defaults, read from `ResolverOpts::default()` at run
/// time: (ndots, cache entries, timeout in seconds, attempts, ip strategy).
pub fn hickory_defaults() -> (usize, u64, f64, usize, String) {
    let options = ResolverOpts::default();
    (
        options.ndots,
        options.cache_size,
        options.timeout.as_secs_f64(),
        options.attempts,
        format!("{:?}", options.ip_strategy),
    )
}
