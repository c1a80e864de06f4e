//! Part 5, the pool that outlives a DNS change: a blue server on 127.0.0.1
//! and a green one on 127.0.0.2 (same port) behind one name in the lab's
//! DNS server. Steady traffic from four clients; the record switches from
//! blue to green; each request notes which server answered.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, anyhow};
use lab_kit::{Series, net::AbortOnDrop};
use serde::Serialize;

use crate::{
    Config,
    dns_server::DnsServer,
    max_age::MaxAgeClient,
    resolvers::{LabResolver, StubSettings},
    servers::{LabeledServer, same_port, std_listener},
};

const NAME: &str = "shop.lab.test";
const BLUE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const GREEN: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

lab_kit::series! {
    /// How the client's pool is set up.
    pub enum PoolSetting in "switch" {
        /// `reqwest::Client::builder()` with its defaults.
        Default => "default",
        /// A short `pool_idle_timeout`.
        IdleTimeout => "idle-timeout",
        /// The lab's `MaxAgeClient`.
        MaxAge => "max-age",
        /// No pool at all (`pool_max_idle_per_host(0)`): a lookup per request.
        NoPool => "no-pool",
    }
}

/// One request: when, relative to the switch, and which server answered.
#[derive(Debug, Clone, Copy)]
struct Answer {
    ms_since_switch: f64,
    old: bool,
}

/// Share of requests to the old address in one time bucket (a chart point).
#[derive(Debug, Clone, Serialize)]
pub struct Bucket {
    pub ms_since_switch: f64,
    pub share_old: f64,
    pub requests: usize,
}

/// One client over the run.
#[derive(Debug, Clone, Serialize)]
pub struct SwitchRun {
    pub requests_after_switch: usize,
    pub old_after_switch: usize,
    pub new_after_switch: usize,
    /// Whether the last requests of the watch went to the new address.
    pub moved: bool,
    /// From the switch to the last request the old server answered.
    pub on_old_ms: f64,
    /// How long the lab watched after the switch.
    pub watch_ms: f64,
    pub ttl_s: f64,
    pub idle_timeout_ms: f64,
    pub max_age_ms: f64,
    pub interval_ms: f64,
}

/// Both servers, the DNS server, all four clients at once, one switch.
pub async fn run_switch(config: &Config) -> Result<Vec<(String, SwitchRun, Vec<Bucket>)>> {
    let (blue_listener, green_listener) =
        same_port(BLUE, |port| std_listener(SocketAddr::new(GREEN, port)))
            .await
            .context(
                "binding 127.0.0.1 and 127.0.0.2 (Linux routes all of 127.0.0.0/8 to loopback)",
            )?;
    let blue = LabeledServer::serve(blue_listener, "blue")?;
    let green = LabeledServer::serve(green_listener, "green")?;
    let dns = DnsServer::start(config.switch_ttl_s, Duration::ZERO).await?;
    dns.set(NAME, &[BLUE]);
    let url = format!("http://{NAME}:{}/", blue.addr.port());
    let switch_at = Instant::now() + Duration::from_secs_f64(config.warm_s);
    let mut traffic = Vec::new();
    for setting in PoolSetting::ALL {
        let sender = Sender::new(setting, config, dns.addr)?;
        let url = url.clone();
        let config = config.clone();
        traffic.push((
            setting,
            AbortOnDrop::spawn(async move { sender.steady(&url, &config, switch_at).await }),
        ));
    }
    tokio::time::sleep_until(switch_at.into()).await;
    // ANCHOR: switch
    dns.set(NAME, &[GREEN]); // the blue/green switch: one record changes
    // ANCHOR_END: switch
    let bound = Duration::from_secs_f64(config.watch_s + 10.0);
    let mut results = Vec::new();
    for (setting, task) in traffic {
        let answers = task
            .join_within(bound)
            .await
            .ok_or_else(|| anyhow!("{}: the traffic did not end", setting.name()))?
            .with_context(|| setting.name())?;
        results.push(summarise(setting, config, &answers));
    }
    if blue.served() == 0 || green.served() == 0 {
        return Err(anyhow!("the blue or the green server served nothing"));
    }
    Ok(results)
}

/// How one setting sends: a plain client, or the max-age wrapper.
enum Sender {
    Plain(reqwest::Client),
    Aged(MaxAgeClient),
}

impl Sender {
    fn new(setting: PoolSetting, config: &Config, dns: SocketAddr) -> Result<Sender> {
        // Each client has its own resolver (and cache), as separate
        // processes would.
        let resolver = LabResolver::new(&StubSettings::plain(dns))?;
        let builder = move || {
            reqwest::Client::builder()
                .no_proxy()
                .dns_resolver(resolver.clone())
        };
        let idle_timeout = Duration::from_secs_f64(config.idle_timeout_ms / 1000.0);
        Ok(match setting {
            PoolSetting::Default => Sender::Plain(builder().build()?),
            PoolSetting::IdleTimeout => {
                Sender::Plain(builder().pool_idle_timeout(idle_timeout).build()?)
            }
            PoolSetting::NoPool => Sender::Plain(builder().pool_max_idle_per_host(0).build()?),
            PoolSetting::MaxAge => {
                let max_age = Duration::from_secs_f64(config.max_age_ms / 1000.0);
                Sender::Aged(MaxAgeClient::new(max_age, move || builder().build())?)
            }
        })
    }

    /// One request every `interval_ms`, from now until the watch ends.
    async fn steady(&self, url: &str, config: &Config, switch_at: Instant) -> Result<Vec<Answer>> {
        let end = switch_at + Duration::from_secs_f64(config.watch_s);
        let mut ticker =
            tokio::time::interval(Duration::from_secs_f64(config.interval_ms / 1000.0));
        let mut answers = Vec::new();
        while Instant::now() < end {
            ticker.tick().await;
            let client = match self {
                Sender::Plain(client) => client.clone(),
                Sender::Aged(clients) => clients.client()?,
            };
            let response = tokio::time::timeout(Duration::from_secs(5), client.get(url).send())
                .await
                .context("a request still waiting after 5 s")?
                .context("sending")?;
            let label = response.text().await.context("reading the body")?;
            let now = Instant::now();
            let ms_since_switch = if now >= switch_at {
                (now - switch_at).as_secs_f64() * 1000.0
            } else {
                -((switch_at - now).as_secs_f64() * 1000.0)
            };
            answers.push(Answer {
                ms_since_switch,
                old: label == "blue",
            });
        }
        Ok(answers)
    }
}

fn summarise(
    setting: PoolSetting,
    config: &Config,
    answers: &[Answer],
) -> (String, SwitchRun, Vec<Bucket>) {
    let after: Vec<&Answer> = answers
        .iter()
        .filter(|a| a.ms_since_switch >= 0.0)
        .collect();
    let old_after = after.iter().filter(|a| a.old).count();
    // "Moved": the last tenth of the watch went to the new address only.
    let tail_from = config.watch_s * 1000.0 * 0.9;
    let tail: Vec<&&Answer> = after
        .iter()
        .filter(|a| a.ms_since_switch >= tail_from)
        .collect();
    let moved = !tail.is_empty() && tail.iter().all(|a| !a.old);
    let on_old_ms = after
        .iter()
        .filter(|a| a.old)
        .map(|a| a.ms_since_switch)
        .fold(0.0, f64::max);
    let bucket_ms = config.bucket_ms;
    let mut buckets = Vec::new();
    let mut start = -config.warm_s * 1000.0;
    while start < config.watch_s * 1000.0 {
        let inside: Vec<&Answer> = answers
            .iter()
            .filter(|a| a.ms_since_switch >= start && a.ms_since_switch < start + bucket_ms)
            .collect();
        if !inside.is_empty() {
            buckets.push(Bucket {
                ms_since_switch: start + bucket_ms / 2.0,
                share_old: inside.iter().filter(|a| a.old).count() as f64 / inside.len() as f64,
                requests: inside.len(),
            });
        }
        start += bucket_ms;
    }
    (
        setting.series(),
        SwitchRun {
            requests_after_switch: after.len(),
            old_after_switch: old_after,
            new_after_switch: after.len() - old_after,
            moved,
            on_old_ms,
            watch_ms: config.watch_s * 1000.0,
            ttl_s: f64::from(config.switch_ttl_s),
            idle_timeout_ms: config.idle_timeout_ms,
            max_age_ms: config.max_age_ms,
            interval_ms: config.interval_ms,
        },
        buckets,
    )
}
