//! `lab-keepalive-race probe`: measures how long any HTTP/1.1 server, in any
//! language, keeps an idle keep-alive connection open, next to what it
//! advertises in `Keep-Alive: timeout=`, and states the rule for a balancer
//! in front of it.
//!
//! The probe is bounded: at most `connect` + `response` + `window` seconds
//! (2 + 5 + 75 by default), then it gives a verdict or one error line.

use std::{
    net::SocketAddr,
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use lab_kit::flags::{Flags, Opt};
use serde::Serialize;

use crate::wire::{Wire, WireError, get_request, keep_alive_timeout};

/// What to probe and for how long.
#[derive(Debug, Clone)]
pub struct IdleProbeConfig {
    pub target: SocketAddr,
    /// The `Host` header to send (the target as the user typed it).
    pub host: String,
    pub path: String,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    /// How long to watch the idle connection after the response.
    pub window: Duration,
    /// Plain TCP, or TLS (the doctor's `https://` targets).
    pub connector: lab_kit::conn::Connector,
}

impl IdleProbeConfig {
    pub fn new(target: SocketAddr, window: Duration) -> IdleProbeConfig {
        IdleProbeConfig {
            target,
            host: target.to_string(),
            path: "/".into(),
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(5),
            window,
            connector: lab_kit::conn::Connector::Plain,
        }
    }

    /// The longest the probe can take.
    pub fn bound(&self) -> Duration {
        self.connect_timeout + self.response_timeout + self.window
    }
}

/// What the probe saw.
#[derive(Debug, Clone, Serialize)]
pub struct IdleProbeReport {
    pub status: u16,
    /// `timeout=` of the `Keep-Alive` header, in seconds, if the server sent one.
    pub advertised_s: Option<f64>,
    /// The server answered `Connection: close` (no keep-alive at all).
    pub connection_close: bool,
    /// When the server closed the idle connection, counted from the moment
    /// the response had arrived; `None` if it was still open after the window.
    pub closed_after_ms: Option<f64>,
    /// `closed` (FIN) or `reset` (RST), when it closed.
    pub how: Option<&'static str>,
    /// Bytes the server sent on the idle connection before closing (a 408, say).
    pub unsolicited_bytes: usize,
    pub window_ms: f64,
}

// ANCHOR: probe
/// Sends one request, reads the whole response, then watches the idle
/// connection until the server closes it or the window ends.
pub async fn probe(config: &IdleProbeConfig) -> Result<IdleProbeReport> {
    let mut wire = Wire::connect_with(&config.connector, config.target, config.connect_timeout)
        .await
        .with_context(|| format!("connecting to {}", config.target))?;
    wire.send(&get_request(&config.path, &config.host))
        .await
        .context("sending the request")?;
    let response = tokio::time::timeout(config.response_timeout, wire.read_response("GET"))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "no complete HTTP response within {:?} (the server accepted the connection and \
                 did not answer)",
                config.response_timeout
            )
        })?
        .context("reading the response")?;
    // The idle period starts now: the connection is back to "between requests".
    let idle_since = Instant::now();
    let advertised_s = response.header("keep-alive").and_then(keep_alive_timeout);
    let mut report = IdleProbeReport {
        status: response.status,
        advertised_s,
        connection_close: response.close,
        closed_after_ms: None,
        how: None,
        unsolicited_bytes: 0,
        window_ms: config.window.as_secs_f64() * 1000.0,
    };
    if response.close {
        return Ok(report);
    }
    let deadline = idle_since + config.window;
    loop {
        let waited = tokio::time::timeout_at(deadline.into(), wire.wait_for_activity()).await;
        let elapsed_ms = idle_since.elapsed().as_secs_f64() * 1000.0;
        match waited {
            Err(_) => return Ok(report), // still open at the end of the window
            Ok(Ok(None)) => {
                report.closed_after_ms = Some(elapsed_ms);
                report.how = Some("closed");
                return Ok(report);
            }
            Ok(Err(WireError::Reset)) => {
                report.closed_after_ms = Some(elapsed_ms);
                report.how = Some("reset");
                return Ok(report);
            }
            Ok(Err(other)) => return Err(other).context("watching the idle connection"),
            Ok(Ok(Some(_))) => {
                // Some servers send a 408 before closing an idle connection:
                // count the bytes, throw them away, keep watching.
                report.unsolicited_bytes += wire.buffered();
                wire.clear();
            }
        }
    }
}
// ANCHOR_END: probe

/// The one-paragraph verdict the `probe` subcommand prints.
pub fn verdict(config: &IdleProbeConfig, report: &IdleProbeReport) -> String {
    let advertised = match report.advertised_s {
        Some(seconds) => format!("advertises Keep-Alive: timeout={seconds}"),
        None => "sends no Keep-Alive header".to_string(),
    };
    let target = config.target;
    if report.connection_close {
        return format!(
            "{target}: answered {} without keep-alive (Connection: close, or HTTP/1.0); it does \
             not keep connections alive, so a balancer cannot reuse them and there is no idle \
             race (but every request pays a new connection)",
            report.status
        );
    }
    match report.closed_after_ms {
        Some(millis) => {
            let seconds = millis / 1000.0;
            let mut text = format!(
                "{target}: answered {}, {advertised}, and {} the idle connection after {seconds:.2} s.\n\
                 Rule: a balancer in front of this must close idle connections before {seconds:.2} s \
                 (its idle timeout below that, with a margin of at least one round trip).",
                report.status,
                if report.how == Some("reset") {
                    "reset"
                } else {
                    "closed"
                },
            );
            if let Some(hint) = report.advertised_s
                && (hint - seconds).abs() > 0.5
            {
                text.push_str(&format!(
                    "\nNote: the advertised {hint} s and the measured {seconds:.2} s differ; \
                     balancers ignore the hint, so the measured value is the one that counts."
                ));
            }
            text
        }
        None => format!(
            "{target}: answered {}, {advertised}, and did not close the idle connection within \
             the {:.1} s window.\nRule: a balancer with an idle timeout below {:.1} s is safe \
             from this race; the server itself never reclaims idle connections in that time.",
            report.status,
            report.window_ms / 1000.0,
            report.window_ms / 1000.0
        ),
    }
}

/// The `probe` subcommand's arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleProbeArgs {
    pub target: String,
    pub path: String,
    pub window: Duration,
    pub allow_remote: bool,
}

/// The probe's flags: what [`parse_args`] accepts and what `--help` lists.
#[rustfmt::skip]
const PROBE_FLAGS: [Opt; 4] = [
    Opt::value("--target", "HOST:PORT", "the server to probe (required)"),
    Opt::value("--path", "/", "the path of the one GET"),
    Opt::value("--window", "SECONDS", "how long to watch the idle connection (75)"),
    Opt::switch("--allow-remote", "probe a target that is not loopback"),
];

/// `probe --help`.
pub fn probe_usage() -> String {
    format!(
        "Usage: lab-keepalive-race probe --target HOST:PORT [FLAGS]\n\n\
         Sends one GET, then measures how long the server keeps the idle keep-alive\n\
         connection open. Bounded: at most 2 s to connect + 5 s for the response + the\n\
         window. Loopback targets only, unless --allow-remote is given.\n\n{}",
        lab_kit::flags::help(&PROBE_FLAGS, 2).trim_end()
    )
}

/// Parses the arguments after `probe` with the kit's [`Flags`]:
/// `--allow-remote` alone, every other flag with one value.
pub fn parse_args(arguments: &[String]) -> Result<IdleProbeArgs> {
    let mut allow_remote = false;
    let mut target = None;
    let mut path = "/".to_string();
    let mut window = Duration::from_secs(75);
    let mut flags = Flags::new(arguments)
        .for_what("probe")
        .declared(&PROBE_FLAGS);
    while let Some(flag) = flags
        .next_flag()
        .map_err(|error| anyhow::anyhow!("{error} (see probe --help)"))?
    {
        match flag.name {
            "--allow-remote" => allow_remote = true,
            "--target" => target = Some(flag.value.to_string()),
            "--path" => path = flag.value.to_string(),
            "--window" => {
                let seconds: f64 = flag.parse("a number of seconds")?;
                if !(seconds > 0.0 && seconds <= 3600.0) {
                    bail!("--window must be between 0 and 3600 seconds");
                }
                window = Duration::from_secs_f64(seconds);
            }
            _ => bail!("{} (see probe --help)", flag.unknown()),
        }
    }
    let target = target.context("--target HOST:PORT is required (see probe --help)")?;
    if !path.starts_with('/') {
        bail!("--path must start with '/'");
    }
    Ok(IdleProbeArgs {
        target,
        path,
        window,
        allow_remote,
    })
}

/// Resolves `HOST:PORT` and refuses anything that is not loopback unless
/// `allow_remote`. Without it, only IP literals and `localhost` are looked
/// at, so not even a DNS query leaves the machine.
pub async fn resolve_target(target: &str, allow_remote: bool) -> Result<SocketAddr> {
    if let Ok(literal) = target.parse::<SocketAddr>() {
        if !allow_remote && !literal.ip().is_loopback() {
            bail!(
                "{target} is not a loopback address; the probe talks to 127.0.0.0/8 and [::1] \
                 only unless --allow-remote is given"
            );
        }
        return Ok(literal);
    }
    let (host, _port) = target
        .rsplit_once(':')
        .with_context(|| format!("{target:?} is not HOST:PORT"))?;
    if !allow_remote && !host.eq_ignore_ascii_case("localhost") {
        bail!(
            "{target} is not a loopback address; give 127.0.0.1:PORT, [::1]:PORT or \
             localhost:PORT, or --allow-remote"
        );
    }
    let addresses: Vec<SocketAddr> =
        tokio::time::timeout(Duration::from_secs(5), tokio::net::lookup_host(target))
            .await
            .with_context(|| format!("resolving {target:?} took over 5 s"))?
            .with_context(|| format!("resolving {target:?}"))?
            .collect();
    if !allow_remote && !addresses.iter().all(|address| address.ip().is_loopback()) {
        bail!("{target} resolves to a non-loopback address; use --allow-remote");
    }
    // Prefer IPv4, as most servers in a lab listen on 127.0.0.1 only.
    addresses
        .iter()
        .find(|address| address.is_ipv4())
        .or(addresses.first())
        .copied()
        .with_context(|| format!("{target:?} resolves to no address"))
}

/// The subcommand's `main`: a verdict on stdout and exit 0, or one error
/// line and exit 2.
pub fn probe_main(arguments: &[String]) -> ExitCode {
    lab_kit::cli::run_subcommand(
        concat!(env!("CARGO_PKG_NAME"), " probe"),
        run_probe(arguments),
    )
}

/// The whole subcommand: parse, resolve, probe, print the verdict.
pub async fn run_probe(arguments: &[String]) -> Result<()> {
    if lab_kit::flags::asks_for_help(arguments) {
        println!("{}", probe_usage());
        return Ok(());
    }
    let args = parse_args(arguments)?;
    let address = resolve_target(&args.target, args.allow_remote).await?;
    let mut config = IdleProbeConfig::new(address, args.window);
    config.host = args.target.clone();
    config.path = args.path.clone();
    eprintln!(
        "probing {address}{} (at most {:.0} s)...",
        config.path,
        config.bound().as_secs_f64()
    );
    // A second, outer bound: whatever happens inside, the probe ends.
    let report = tokio::time::timeout(config.bound() + Duration::from_secs(1), probe(&config))
        .await
        .map_err(|_| anyhow::anyhow!("the probe did not finish within {:?}", config.bound()))?
        .with_context(|| format!("probing {address}"))?;
    println!("{}", verdict(&config, &report));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use lab_kit::flags::to_args as strings;

    #[test]
    fn parses_probe_arguments() {
        let args = parse_args(&strings(&["--target", "127.0.0.1:80", "--window", "2.5"])).unwrap();
        assert_eq!(args.path, "/");
        assert_eq!(args.window, Duration::from_millis(2500));
        assert!(!args.allow_remote);
        assert!(parse_args(&strings(&["--path", "/x"])).is_err());
        assert!(parse_args(&strings(&["--target"])).is_err());
        assert!(parse_args(&strings(&["--target", "a:1", "--window", "-1"])).is_err());
        assert!(parse_args(&strings(&["--target", "a:1", "--bogus"])).is_err());
        let remote = parse_args(&strings(&["--allow-remote", "--target", "a:1"])).unwrap();
        assert!(remote.allow_remote);
        assert_eq!(remote.target, "a:1");
        for bogus in [&["--target", "a:1", "--bogus", "1"][..], &["--bogus"]] {
            let unknown = parse_args(&strings(bogus)).unwrap_err();
            assert_eq!(
                format!("{unknown:#}"),
                "unknown probe flag \"--bogus\" (see probe --help)"
            );
        }
    }

    #[tokio::test]
    async fn refuses_remote_targets_unless_allowed() {
        assert!(resolve_target("127.0.0.1:9", false).await.is_ok());
        assert!(resolve_target("[::1]:9", false).await.is_ok());
        let refused = resolve_target("192.0.2.1:80", false).await.unwrap_err();
        assert!(
            format!("{refused:#}").contains("not a loopback"),
            "{refused:#}"
        );
        assert!(resolve_target("192.0.2.1:80", true).await.is_ok());
        assert!(resolve_target("no-port", false).await.is_err());
        let named = resolve_target("example.invalid:80", false)
            .await
            .unwrap_err();
        assert!(format!("{named:#}").contains("not a loopback"), "{named:#}");
        assert!(
            resolve_target("localhost:9", false)
                .await
                .unwrap()
                .ip()
                .is_loopback()
        );
    }
}
