//! Part 4, address families: `localhost` answered as `[::1, 127.0.0.1]`
//! (what many machines' /etc/hosts gives, fixed here by the lab's resolver
//! so the result holds on any machine) against servers on one family only,
//! and hyper-util's Happy Eyeballs against a family that does not answer:
//! a listener on [::1] with a backlog of 0 whose one queue slot the lab
//! fills itself, so every further connect to it hangs.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use lab_kit::{Series, stats::median};
use serde::Serialize;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

use crate::{
    Config,
    resolvers::FixedAnswers,
    servers::{LabeledServer, same_port, std_listener},
};

const V4: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const V6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

lab_kit::series! {
    /// Where the server listens, and what the resolver answers for `localhost`.
    pub enum FamilyCase in "family" {
        /// Server on 127.0.0.1 only; answer `[::1, 127.0.0.1]`.
        V4ServerV6First => "v4-server-v6-first",
        /// Server on [::1] only; answer `[::1, 127.0.0.1]`.
        V6ServerV6First => "v6-server-v6-first",
        /// Server on [::1] only; answer `[127.0.0.1]` (an /etc/hosts without `::1`).
        V6ServerV4Only => "v6-server-v4-only",
        /// Server on 127.0.0.1 only; answer `[::1]`.
        V4ServerV6Only => "v4-server-v6-only",
        /// Server on 127.0.0.1; [::1] accepts no connection (its queue is
        /// full); answer `[::1, 127.0.0.1]`: Happy Eyeballs' fallback.
        SilentV6V6First => "v6-silent-v6-first",
        /// The same, answer `[127.0.0.1, ::1]`.
        SilentV6V4First => "v6-silent-v4-first",
    }
}

impl FamilyCase {
    fn answers(self) -> Vec<IpAddr> {
        match self {
            FamilyCase::V4ServerV6First
            | FamilyCase::V6ServerV6First
            | FamilyCase::SilentV6V6First => {
                vec![V6, V4]
            }
            FamilyCase::SilentV6V4First => vec![V4, V6],
            FamilyCase::V6ServerV4Only => vec![V4],
            FamilyCase::V4ServerV6Only => vec![V6],
        }
    }

    fn silent(self) -> bool {
        matches!(
            self,
            FamilyCase::SilentV6V6First | FamilyCase::SilentV6V4First
        )
    }
}

/// One case's requests.
#[derive(Debug, Clone, Serialize)]
pub struct FamilyOutcome {
    /// The resolver's answer, in order.
    pub answer_order: Vec<String>,
    /// "answered" or "failed" (the last request's).
    pub outcome: String,
    /// The server that answered ("127.0.0.1", "::1"), or "none".
    pub answered_by: String,
    pub requests: usize,
    pub ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// The error's chain for a failure, empty otherwise.
    pub error: String,
    /// For the silent family: a probe connect to it hung (as it must).
    pub silent_hung: bool,
}

/// What the machine's own resolver says about `localhost`: a fact about the
/// machine, recorded, never relied on.
#[derive(Debug, Clone, Serialize)]
pub struct SystemLocalhost {
    pub addresses: Vec<String>,
    pub has_ipv6: bool,
}

pub async fn system_localhost() -> Result<SystemLocalhost> {
    let found: Vec<SocketAddr> = tokio::net::lookup_host("localhost:0")
        .await
        .context("looking up localhost with the system resolver")?
        .collect();
    Ok(SystemLocalhost {
        addresses: found
            .iter()
            .map(|address| address.ip().to_string())
            .collect(),
        has_ipv6: found.iter().any(SocketAddr::is_ipv6),
    })
}

/// What the data file records when part 4 did not run.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub reason: &'static str,
}

impl Skipped {
    pub fn no_ipv6_loopback() -> Skipped {
        Skipped {
            reason: "no [::1] on this machine's loopback interface",
        }
    }
}

/// Every case, one after the other; none, said in one line, where this
/// machine has no `[::1]` on its loopback interface.
pub async fn run_families(config: &Config) -> Result<Vec<(String, FamilyOutcome)>> {
    let ipv6 = std::net::TcpListener::bind((V6, 0)).map(drop);
    run_families_if(ipv6, config).await
}

/// [`run_families`], given whether `[::1]` could be bound.
pub async fn run_families_if(
    ipv6: std::io::Result<()>,
    config: &Config,
) -> Result<Vec<(String, FamilyOutcome)>> {
    if let Err(error) = ipv6 {
        eprintln!(
            "dns: part 4 skipped: [::1] cannot be bound on this machine ({error}; is IPv6 \
             switched off on loopback, as in some containers?)"
        );
        return Ok(Vec::new());
    }
    let mut results = Vec::new();
    for case in FamilyCase::ALL {
        let outcome = one_case(case, config).await.with_context(|| case.name())?;
        results.push((case.series(), outcome));
    }
    Ok(results)
}

/// The servers of one case: (the real server, the silent listener and the
/// connection that fills its queue, if any). Both families on one port.
struct CaseServers {
    port: u16,
    _server: LabeledServer,
    _silent: Option<(TcpListener, TcpStream)>,
}

async fn servers_for(case: FamilyCase) -> Result<CaseServers> {
    let server_on_v6 = matches!(
        case,
        FamilyCase::V6ServerV6First | FamilyCase::V6ServerV4Only
    );
    let (mine, other) = if server_on_v6 { (V6, V4) } else { (V4, V6) };
    if case.silent() {
        // ANCHOR: silent
        let (listener, silent) = same_port(V4, |port| {
            let socket = TcpSocket::new_v6()?;
            socket.bind(SocketAddr::new(V6, port))?;
            socket.listen(0) // a queue of one, never accepted
        })
        .await?;
        let port = listener.local_addr()?.port();
        let filler = tokio::time::timeout(
            Duration::from_secs(2),
            TcpStream::connect(SocketAddr::new(V6, port)),
        )
        .await
        .context("filling the silent listener's queue: timed out")?
        .context("filling the silent listener's queue")?;
        // ANCHOR_END: silent
        let server = LabeledServer::serve(listener, "127.0.0.1")?;
        return Ok(CaseServers {
            port,
            _server: server,
            _silent: Some((silent, filler)),
        });
    }
    // Bind the other family's port too, then let it go: nothing listens there.
    let (listener, _other) =
        same_port(mine, |port| std_listener(SocketAddr::new(other, port))).await?;
    let port = listener.local_addr()?.port();
    let label = if server_on_v6 { "::1" } else { "127.0.0.1" };
    Ok(CaseServers {
        port,
        _server: LabeledServer::serve(listener, label)?,
        _silent: None,
    })
}

async fn one_case(case: FamilyCase, config: &Config) -> Result<FamilyOutcome> {
    let servers = servers_for(case).await?;
    let silent_hung = if case.silent() {
        tokio::time::timeout(
            Duration::from_millis(500),
            TcpStream::connect(SocketAddr::new(V6, servers.port)),
        )
        .await
        .is_err()
    } else {
        false
    };
    let url = format!("http://localhost:{}/", servers.port);
    let requests = if case.silent() {
        config.eyeballs_repeats
    } else {
        3
    };
    let mut times = Vec::new();
    let mut last = (String::from("failed"), String::from("none"), String::new());
    for _ in 0..requests {
        // ANCHOR: client
        let client = reqwest::Client::builder()
            .no_proxy()
            .dns_resolver(FixedAnswers(case.answers()))
            .build()
            .context("building the client")?;
        // ANCHOR_END: client
        let started = Instant::now();
        let sent = tokio::time::timeout(Duration::from_secs(5), client.get(&url).send()).await;
        let result = match sent {
            Err(_) => Err("still waiting after 5 s".to_string()),
            Ok(Err(error)) => Err(chain(&error)),
            Ok(Ok(response)) => response.text().await.map_err(|error| chain(&error)),
        };
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        last = match result {
            Ok(label) => ("answered".to_string(), label, String::new()),
            Err(error) => ("failed".to_string(), "none".to_string(), error),
        };
    }
    Ok(FamilyOutcome {
        answer_order: case.answers().iter().map(IpAddr::to_string).collect(),
        outcome: last.0,
        answered_by: last.1,
        requests,
        ms: median(&times),
        min_ms: times.iter().copied().fold(f64::INFINITY, f64::min),
        max_ms: times.iter().copied().fold(0.0, f64::max),
        error: last.2,
        silent_hung,
    })
}

/// An error and its sources, joined, without the URL's port (which changes
/// from run to run).
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = Vec::new();
    let mut next = error.source();
    while let Some(cause) = next {
        parts.push(cause.to_string());
        next = cause.source();
    }
    parts.join(": ")
}
