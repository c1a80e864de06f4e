//! `lab-client-timeouts check`: one GET to any HTTP server with the
//! two-phase timeout, and a verdict naming the phase that failed, if any.
//!
//! Bounded: at most the connect timeout + the TTFB timeout + the body, with
//! the body ending at the first idle gap or at the overall bound.

use std::{net::SocketAddr, process::ExitCode, time::Duration};

use anyhow::{Context, Result, bail};
use lab_kit::flags::{Flags, Opt};

use crate::two_phase::{TwoPhase, TwoPhaseError};

/// The check's flags: what [`parse_args`] accepts and what `--help` lists.
#[rustfmt::skip]
const CHECK_FLAGS: [Opt; 5] = [
    Opt::value("--target", "HOST:PORT", "the server to check (required)"),
    Opt::value("--path", "/", "the path of the one GET"),
    Opt::value("--ttfb-ms", "8000", "the time-to-first-byte timeout"),
    Opt::value("--idle-ms", "15000", "the body idle timeout"),
    Opt::switch("--allow-remote", "check a target that is not loopback"),
];

/// `check --help`.
pub fn check_usage() -> String {
    format!(
        "Usage: lab-client-timeouts check --target HOST:PORT [FLAGS]\n\n\
         Sends one GET with a 2 s connect timeout, a time-to-first-byte timeout and a\n\
         body idle timeout, and says which phase, if any, failed. Loopback targets only\n\
         (127.0.0.0/8, [::1]) unless --allow-remote is given.\n\n{}",
        lab_kit::flags::help(&CHECK_FLAGS, 2).trim_end()
    )
}

/// The `check` subcommand's arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckArgs {
    pub target: SocketAddr,
    pub path: String,
    pub ttfb: Duration,
    pub idle: Duration,
}

/// Parses the arguments after `check`; refuses a target that is not a
/// loopback address unless `--allow-remote` is given. Only IP literals
/// are accepted, so not even a DNS query leaves the machine.
pub fn parse_args(arguments: &[String]) -> Result<CheckArgs> {
    let (mut target, mut path) = (None::<String>, "/".to_string());
    let (mut ttfb, mut idle) = (Duration::from_secs(8), Duration::from_secs(15));
    let mut allow_remote = false;
    let mut flags = Flags::new(arguments)
        .for_what("check")
        .declared(&CHECK_FLAGS);
    while let Some(flag) = flags.next_flag()? {
        match flag.name {
            "--target" => target = Some(flag.value.to_string()),
            "--path" => path = flag.value.to_string(),
            "--ttfb-ms" => ttfb = flag.millis()?,
            "--idle-ms" => idle = flag.millis()?,
            "--allow-remote" => allow_remote = true,
            _ => return Err(flag.unknown()),
        }
    }
    let target = target.context("--target HOST:PORT is required (see check --help)")?;
    let address: SocketAddr = target.parse().with_context(|| {
        format!("--target {target:?} is not IP:PORT (for example 127.0.0.1:8080)")
    })?;
    if !allow_remote && !address.ip().is_loopback() {
        bail!(
            "{address} is not a loopback address; check talks to 127.0.0.0/8 and [::1] only \
             unless --allow-remote is given"
        );
    }
    if !path.starts_with('/') {
        bail!("--path must start with '/'");
    }
    if ttfb.is_zero() || idle.is_zero() {
        bail!("--ttfb-ms and --idle-ms must be above zero");
    }
    Ok(CheckArgs {
        target: address,
        path,
        ttfb,
        idle,
    })
}

/// The subcommand's `main`: a verdict on stdout and exit 0, or one error
/// line and exit 2.
pub fn check_main(arguments: &[String]) -> ExitCode {
    lab_kit::cli::run_subcommand(
        concat!(env!("CARGO_PKG_NAME"), " check"),
        run_check(arguments),
    )
}

/// The whole subcommand: parse, one GET, print the verdict.
pub async fn run_check(arguments: &[String]) -> Result<()> {
    if lab_kit::flags::asks_for_help(arguments) {
        println!("{}", check_usage());
        return Ok(());
    }
    let args = parse_args(arguments)?;
    let client = reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(2))
        .build()
        .context("building the client")?;
    let two_phase = TwoPhase {
        ttfb: args.ttfb,
        body_idle: args.idle,
    };
    let url = format!("http://{}{}", args.target, args.path);
    let request = client.get(&url).build().context("building the request")?;
    let bound = Duration::from_secs(2) + args.ttfb + args.idle * 4;
    let outcome = tokio::time::timeout(bound, two_phase.fetch(&client, request)).await;
    let verdict = match outcome {
        Ok(Ok((status, body))) => {
            format!("{url}: answered {status} with {} body bytes", body.len())
        }
        Ok(Err(TwoPhaseError::Ttfb(limit))) => {
            format!(
                "{url}: no response head within {limit:?}; a caller without a timeout would still be waiting"
            )
        }
        Ok(Err(TwoPhaseError::BodyIdle(limit))) => {
            format!("{url}: the head arrived, then the body was idle for {limit:?}")
        }
        Ok(Err(TwoPhaseError::Http(error))) => {
            bail!("{url}: {}", crate::grid::error_chain(&error))
        }
        Err(_) => format!(
            "{url}: the body kept trickling past {bound:?}; only a total deadline catches this"
        ),
    };
    println!("{verdict}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use lab_kit::flags::to_args as strings;

    fn error_of(items: &[&str]) -> String {
        let text = format!("{:#}", parse_args(&strings(items)).expect_err("an error"));
        assert!(!text.contains('\n'), "not one line: {text}");
        text
    }

    #[test]
    fn parses_and_refuses_in_one_line() {
        let args =
            parse_args(&strings(&["--target", "127.0.0.1:80", "--ttfb-ms", "50"])).expect("valid");
        assert_eq!(args.ttfb, Duration::from_millis(50));
        assert!(parse_args(&strings(&["--target", "[::1]:80"])).is_ok());
        assert!(error_of(&["--target", "192.0.2.1:80"]).contains("not a loopback"));
        assert!(parse_args(&strings(&["--target", "192.0.2.1:80", "--allow-remote"])).is_ok());
        assert!(error_of(&["--target", "example.com:80"]).contains("not IP:PORT"));
        assert!(error_of(&["--bogus", "1"]).contains("unknown check flag"));
        assert!(error_of(&["--target"]).contains("needs a value"));
        assert!(error_of(&[]).contains("required"));
        assert!(error_of(&["--target", "127.0.0.1:80", "--ttfb-ms", "soon"]).contains("not whole"));
    }
}
