//! The check: the dns lab's blue/green setup. A blue server on 127.0.0.1 and
//! a green one on 127.0.0.2 (same port, the lab's `LabeledServer`s), the
//! lab's DNS server answering `shop.lab.test` with blue, hickory-resolver
//! pointed at it (the lab's `LabResolver`, with its cache). Steady traffic
//! through the piece's `ShopClient`; the record switches to green; each
//! answer says which server sent it.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, ensure};
use exercise_kit::{Compression, Variant, Verdict};
use lab_dns::{
    dns_server::DnsServer,
    resolvers::{LabResolver, StubSettings},
    servers::{LabeledServer, same_port, std_listener},
};

exercise_kit::exercise!(
    "an idle timeout never fires on a connection that is never idle, and a pooled connection \
     never looks the name up again: bound the client's age instead, and once it is max_age old \
     hand out a freshly built client, whose empty pool must resolve the name again",
);

const NAME: &str = "shop.lab.test";
const BLUE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const GREEN: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
/// Time runs 60 times faster than in production: a TTL and a maximum age of
/// 60 s are 1 s here.
const COMPRESSION: Compression = Compression(60.0);
const TTL_S: u32 = 1;
const MAX_AGE: Duration = Duration::from_secs(1);
const INTERVAL: Duration = Duration::from_millis(20);
const WARM: Duration = Duration::from_millis(500);
const WATCH: Duration = Duration::from_millis(3500);
/// The end of the watch that must have gone to green only: it starts after
/// one TTL (the cached answer) plus two maximum ages (a rebuild just before
/// the cache expired, then the next one) and a margin.
const TAIL: Duration = Duration::from_millis(1000);

/// Which server answered each request, and when relative to the switch
/// (negative: before).
async fn traffic(
    client: impl Fn() -> Result<reqwest::Client>,
    dns: &DnsServer,
    url: &str,
) -> Result<Vec<(f64, bool)>> {
    let switch_at = Instant::now() + WARM;
    let end = switch_at + WATCH;
    let mut switched = false;
    let mut ticker = tokio::time::interval(INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut answers = Vec::new();
    while Instant::now() < end {
        ticker.tick().await;
        if !switched && Instant::now() >= switch_at {
            dns.set(NAME, &[GREEN]); // the blue/green switch: one record changes
            switched = true;
        }
        let client = client()?;
        let label = tokio::time::timeout(Duration::from_secs(2), async {
            client
                .get(url)
                .send()
                .await?
                .error_for_status()?
                .text()
                .await
        })
        .await
        .context("a request still waiting after 2 s")?
        .context("a request")?;
        let now = Instant::now();
        let since_switch_s = if now >= switch_at {
            (now - switch_at).as_secs_f64()
        } else {
            -(switch_at - now).as_secs_f64()
        };
        answers.push((since_switch_s, label == "blue"));
    }
    Ok(answers)
}

async fn check(variant: Variant) -> Result<Verdict> {
    let (blue_listener, green_listener) =
        same_port(BLUE, |port| std_listener(SocketAddr::new(GREEN, port)))
            .await
            .context("binding 127.0.0.1 and 127.0.0.2 (Linux routes 127.0.0.0/8 to loopback)")?;
    let blue = LabeledServer::serve(blue_listener, "blue")?;
    let green = LabeledServer::serve(green_listener, "green")?;
    let dns = DnsServer::start(TTL_S, Duration::ZERO).await?;
    dns.set(NAME, &[BLUE]);
    let resolver = LabResolver::new(&StubSettings::plain(dns.addr))?;
    // How the service builds its clients: here, behind the lab's resolver.
    let base = move || {
        reqwest::Client::builder()
            .dns_resolver(resolver.clone())
            .no_proxy()
    };
    let url = format!("http://{NAME}:{}/", blue.addr.port());
    let answers = match variant {
        Variant::Yours => {
            let shop = dns_stale_pool_max_age::ShopClient::new(base, MAX_AGE)?;
            traffic(|| shop.client(), &dns, &url).await?
        }
        Variant::Solution => {
            let shop = solution::ShopClient::new(base, MAX_AGE)?;
            traffic(|| shop.client(), &dns, &url).await?
        }
    };
    ensure!(
        blue.served() > 0,
        "no request reached the blue server before the switch"
    );
    let after: Vec<(f64, bool)> = answers.into_iter().filter(|(at, _)| *at >= 0.0).collect();
    let old = after.iter().filter(|(_, old)| *old).count();
    let tail_from = (WATCH - TAIL).as_secs_f64();
    let tail: Vec<&(f64, bool)> = after.iter().filter(|(at, _)| *at >= tail_from).collect();
    let moved = !tail.is_empty() && tail.iter().all(|(_, old)| !old);
    let last_old_s = after
        .iter()
        .filter(|(_, old)| *old)
        .map(|(at, _)| *at)
        .fold(0.0, f64::max);
    let production = |seconds: f64| COMPRESSION.production_s_of_s(seconds);
    Ok(if moved && green.served() > 0 {
        Verdict::pass(format!(
            "the last request to the old address left {:.0} s after the switch (time compressed \
             {COMPRESSION}x: {last_old_s:.2} s; one TTL plus one maximum age is {:.0} s); \
             {} of {} requests after the switch went to green, and all of the last {:.0} s",
            production(last_old_s),
            production(f64::from(TTL_S) + MAX_AGE.as_secs_f64()),
            after.len() - old,
            after.len(),
            production(TAIL.as_secs_f64())
        ))
    } else {
        Verdict::fail(format!(
            "{old} of {} requests sent in the {:.0} s after the DNS switch still went to the old \
             address (time compressed {COMPRESSION}x: a request every {:.1} s, a TTL of {:.0} s, \
             a max_age of {:.0} s), the last of them {:.0} s after it: the pooled connection \
             was made before the switch, and a connection that is never idle never looks the \
             name up again",
            after.len(),
            production(WATCH.as_secs_f64()),
            production(INTERVAL.as_secs_f64()),
            production(f64::from(TTL_S)),
            production(MAX_AGE.as_secs_f64()),
            production(last_old_s),
        ))
    })
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
