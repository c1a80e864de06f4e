//! The doctor's command line: `doctor [FLAGS] HOST:PORT [CHECK...]`, or
//! `doctor [FLAGS] --port P [CHECK...] -- COMMAND...` to start the server
//! itself (which the shutdown check needs). Flags take one value each, read
//! by the kit's parser; the target and the checks are the words between.

use std::{path::PathBuf, time::Duration};

use anyhow::{Context, Result, bail};
use lab_kit::flags::{self, Arg, Flags, Opt};

pub use crate::duration::duration;
use crate::{
    expect::{self, Expectations},
    finding::{Check, Finding},
    tls::Trust,
};

/// What to probe: a server that already listens, or a command to start.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// `HOST:PORT` as the reader typed it.
    Listening(String),
    /// The command listens on 127.0.0.1:port once started.
    Command { port: u16, command: Vec<String> },
}

/// The routes the checks request, one flag each.
#[derive(Debug, Clone, PartialEq)]
pub struct Paths {
    /// `--path`, an ordinary, fast path: the idle client's request, the canary.
    pub fast: String,
    /// `--body-path`, a route that reads a request body (default: `fast`).
    pub body: Option<String>,
    /// `--read-path`, a route with a large answer, for the slow read (default: `fast`).
    pub read: Option<String>,
    /// `--slow-path`, a slow route: the handler deadline check.
    pub slow: Option<String>,
    /// `--heavy-path`, a route that does heavy work: the blocked-runtime check.
    pub heavy: Option<String>,
    /// `--load-path`, a route with limited capacity: the overload check.
    pub load: Option<String>,
    /// `--ready-path`, the readiness route the shutdown check polls.
    pub ready: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub target: Target,
    /// The checks to run, in the report's order.
    pub checks: Vec<Check>,
    /// The routes the checks request (the usage's "Paths").
    pub paths: Paths,
    /// The idle timeout of the balancer in front (AWS ALB's default: 60 s).
    pub balancer_idle: Duration,
    /// How long the watching checks watch, and the handler deadline waits.
    pub window: Duration,
    /// The overload check's callers give up after this.
    pub caller_timeout: Duration,
    /// The overload ramp's top: 4, a quarter of it, then this many in flight.
    pub max_in_flight: usize,
    /// The shutdown check's grace period (SIGTERM to SIGKILL).
    pub grace: Duration,
    pub json: bool,
    pub allow_remote: bool,
    /// `--expect FILE`: the rules the exit code follows, read before any probe.
    pub expect: Option<Expectations>,
    /// `--json-out FILE`: the JSON report, written there as well.
    pub json_out: Option<PathBuf>,
    /// TLS (`https://HOST:PORT`, or `--tls`), and how to trust the server's
    /// certificate; `None` for plain TCP.
    pub tls: Option<Trust>,
    /// `--h2c`: HTTP/2 over plain TCP, with prior knowledge.
    pub h2c: bool,
}

impl Options {
    /// Only HTTP/2 checks were asked for: the first answer goes over
    /// HTTP/2, so a server that speaks nothing else can be probed.
    pub fn http2_only(&self) -> bool {
        self.checks.iter().all(|check| check.is_http2())
    }
}

impl Paths {
    /// The path `check` requests: its own flag's, `--path` where that flag
    /// defaults to it, or the finding that skips the check when the route it
    /// needs was not given. The one place that knows which flag feeds which
    /// check.
    pub fn for_check(&self, check: Check) -> Result<&str, Finding> {
        let (given, needed) = match check {
            Check::SlowBody | Check::H2SlowBody => {
                return Ok(self.body.as_deref().unwrap_or(&self.fast));
            }
            Check::SlowRead => return Ok(self.read.as_deref().unwrap_or(&self.fast)),
            Check::HandlerDeadline | Check::H2Cancel => (&self.slow, "--slow-path a slow route"),
            Check::BlockedRuntime => (&self.heavy, "--heavy-path a route that does heavy work"),
            Check::Overload | Check::RetryAfter => {
                (&self.load, "--load-path a route with limited capacity")
            }
            Check::IdleKeepAlive
            | Check::SlowHead
            | Check::Shutdown
            | Check::H2Idle
            | Check::H2SlowHead
            | Check::H2Streams
            | Check::H2Goaway => return Ok(&self.fast),
        };
        given
            .as_deref()
            .ok_or_else(|| Finding::skip(check, format!("give {needed} to check it")))
    }
}

/// The doctor's flags: what [`parse`] accepts and what [`usage`] lists, the
/// routes first (`PATH_FLAGS` of them), then the settings. A placeholder is the
/// flag's default where it has one.
#[rustfmt::skip]
const FLAGS: [Opt; 20] = [
    Opt::value("--path", "/", "a fast path: the idle client's request, the canary"),
    Opt::value("--body-path", "PATH", "a route that reads a request body (default: --path)"),
    Opt::value("--read-path", "PATH", "a route with a large answer (default: --path)"),
    Opt::value("--slow-path", "PATH", "a slow route: does the server ever cut it?"),
    Opt::value("--heavy-path", "PATH", "a route that does heavy work: does the canary stall?"),
    Opt::value("--load-path", "PATH", "a route with limited capacity: shed or queue?"),
    Opt::value("--ready-path", "/readyz", "the readiness route (shutdown check)"),
    Opt::value("--balancer-idle", "60s", "the idle timeout of the balancer in front"),
    Opt::value("--window", "45s", "how long the watching checks watch"),
    Opt::value("--caller-timeout", "1s", "the overload check's callers give up after this"),
    Opt::value("--max-in-flight", "64", "top of the overload ramp (4, a quarter of it, then it)"),
    Opt::value("--grace", "30s", "SIGTERM to SIGKILL in the shutdown check"),
    Opt::switch("--json", "one JSON object on stdout instead of the text report"),
    Opt::value("--json-out", "FILE", "also write the JSON report to FILE (for a CI job's artifacts)"),
    Opt::value("--expect", "FILE", "the rules the exit code follows (below), instead of \"any warning\""),
    Opt::switch("--tls", "speak TLS to the target (as https://HOST:PORT does; for --port P -- COMMAND)"),
    Opt::switch("--insecure", "TLS: accept any certificate (a self-signed one on a test port)"),
    Opt::value("--ca", "FILE", "TLS: trust the authorities in this PEM file (default: the system's)"),
    Opt::switch("--h2c", "the HTTP/2 checks over plain TCP, with prior knowledge (no TLS, no upgrade)"),
    Opt::switch("--allow-remote", "probe a host that is not loopback (be polite: the ramp stops \
        at 16 callers, each at most 20 calls a second, the slow read sends at most 4096 \
        requests, and h2-streams does not go past the stream limit)"),
];
const PATH_FLAGS: usize = 7;

/// `doctor --help`.
pub fn usage() -> String {
    format!(
        "\
Usage: doctor [FLAGS] [https://]HOST:PORT [CHECK...]
       doctor [FLAGS] --port P [CHECK...] -- COMMAND [ARGS...]

Probes a running HTTP/1.1 or HTTP/2 server, over plain TCP or TLS (https://
or --tls), for the failures the book teaches and prints one line per check
(pass, warn, FAIL or skip) with what it measured, why it matters and the
chapter that explains it. Checks run at once, each bounded; the default run
takes under a minute (with a command, add the shutdown check's grace period).

Checks (default: all; the h2- ones over TLS or with --h2c): idle-keepalive,
slow-head, slow-body, slow-read, handler-deadline, blocked-runtime, overload,
retry-after, shutdown, h2-idle, h2-slow-head, h2-slow-body, h2-streams,
h2-cancel, h2-goaway.

Paths (a check whose path is not given is skipped):
{}Settings:
{}Durations: 60s, 1.5s, 250ms, 2m.

Exit: 0 every check passed or was skipped; 1 a check warned or failed;
2 could not probe (bad arguments, nothing listening, not HTTP, no answer).

With --expect FILE, exit 1 is for a broken rule of FILE instead (TOML):
  fail-on = [\"fail\"]           # grades that fail the build (default: warn, fail)
  [checks.idle-keepalive]
  fail-on = [\"warn\", \"fail\"]   # this check's own
  max = \"55s\"                  # bounds on what it measured: min, max
Every check measures seconds (until the server closed, cut or reset; the
canary's worst stall; SIGTERM to exit; the least Retry-After) but overload,
which counts the refusals at the top of its ramp. A rule for a check that did
not run, or that measured no number, is broken.",
        flags::help(&FLAGS[..PATH_FLAGS], 2),
        flags::help(&FLAGS[PATH_FLAGS..], 2)
    )
}

/// `--port P`, which goes with a command after `--`: the usage writes it in
/// its synopsis, not in the lists.
const PORT: Opt = Opt::value("--port", "P", "the port the command listens on");

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Options> {
    let (args, command) = match args.iter().position(|arg| arg == "--") {
        Some(split) => (&args[..split], Some(&args[split + 1..])),
        None => (args, None),
    };
    let mut options = defaults();
    let mut port = None;
    let (mut tls, mut trust) = (false, None);
    // The words that are not flags or their values: the target and checks.
    let mut words = Vec::new();
    let declared = [&FLAGS[..], &[PORT]].concat();
    let mut parsed = Flags::new(args).declared(&declared).for_what("doctor");
    while let Some(arg) = parsed.next_arg()? {
        let flag = match arg {
            Arg::Word(word) => {
                words.push(word);
                continue;
            }
            Arg::Flag(flag) => flag,
        };
        let path = || -> Result<String> {
            if !flag.value.starts_with('/') {
                bail!(
                    "{} {:?} is not a path (it starts with /)",
                    flag.name,
                    flag.value
                );
            }
            Ok(flag.value.to_string())
        };
        let time = || duration(flag.value).with_context(|| flag.name.to_string());
        match flag.name {
            "--path" => options.paths.fast = path()?,
            "--body-path" => options.paths.body = Some(path()?),
            "--read-path" => options.paths.read = Some(path()?),
            "--slow-path" => options.paths.slow = Some(path()?),
            "--heavy-path" => options.paths.heavy = Some(path()?),
            "--load-path" => options.paths.load = Some(path()?),
            "--ready-path" => options.paths.ready = path()?,
            "--balancer-idle" => options.balancer_idle = time()?,
            "--window" => options.window = time()?,
            "--caller-timeout" => options.caller_timeout = time()?,
            "--grace" => options.grace = time()?,
            "--max-in-flight" => {
                let top: usize = flag.parse("a whole number")?;
                if !(16..=1024).contains(&top) {
                    bail!("--max-in-flight {top} is not between 16 and 1024");
                }
                options.max_in_flight = top;
            }
            "--port" => port = Some(flag.parse::<u16>("a port")?),
            "--json" => options.json = true,
            "--json-out" => options.json_out = Some(PathBuf::from(flag.value)),
            "--expect" => options.expect = Some(expect::read(flag.value.as_ref())?),
            "--allow-remote" => options.allow_remote = true,
            "--tls" => tls = true,
            "--insecure" => trust = Some(Trust::Insecure),
            "--ca" => trust = Some(Trust::Ca(PathBuf::from(flag.value))),
            "--h2c" => options.h2c = true,
            _ => return Err(flag.unknown()),
        }
    }
    let (target, https) = target_from(port, command, &mut words)?;
    options.target = target;
    options.tls = match (tls || https, trust) {
        (true, trust) => Some(trust.unwrap_or_default()),
        (false, None) => None,
        (false, Some(_)) => {
            bail!("--insecure and --ca go with TLS: an https://HOST:PORT target, or --tls")
        }
    };
    if options.h2c && options.tls.is_some() {
        bail!("--h2c is HTTP/2 without TLS; over TLS the HTTP/2 checks agree on h2 by ALPN");
    }
    let http2 = options.h2c || options.tls.is_some();
    options.checks = checks_named(words, http2)?;
    Ok(options)
}

/// The options before any flag: the defaults the usage gives.
fn defaults() -> Options {
    Options {
        target: Target::Listening(String::new()),
        checks: Vec::new(),
        paths: Paths {
            fast: "/".into(),
            body: None,
            read: None,
            slow: None,
            heavy: None,
            load: None,
            ready: "/readyz".into(),
        },
        balancer_idle: Duration::from_secs(60),
        window: Duration::from_secs(45),
        caller_timeout: Duration::from_secs(1),
        max_in_flight: 64,
        grace: Duration::from_secs(30),
        json: false,
        allow_remote: false,
        expect: None,
        json_out: None,
        tls: None,
        h2c: false,
    }
}

/// A command to start when one follows `--` (with `--port`), or else the
/// first word, `HOST:PORT`, which it takes from `words`; and whether that
/// word asked for TLS (`https://`).
fn target_from(
    port: Option<u16>,
    command: Option<&[String]>,
    words: &mut Vec<&str>,
) -> Result<(Target, bool)> {
    Ok(match (port, command) {
        (Some(0), _) => bail!("--port 0: give the port the command will listen on"),
        (Some(port), Some(command)) if !command.is_empty() => (
            Target::Command {
                port,
                command: command.to_vec(),
            },
            false,
        ),
        (Some(_), _) => bail!("--port P goes with a command after `--`"),
        (None, Some(_)) => bail!("a command after `--` needs --port P, the port it listens on"),
        (None, None) => {
            let Some(target) = words.first() else {
                bail!("no target: give HOST:PORT, or --port P -- COMMAND (see --help)");
            };
            let (target, https) = bare_target(target)?;
            words.remove(0);
            (Target::Listening(target), https)
        }
    })
}

/// `HOST:PORT` from what the reader typed, and whether it asked for TLS:
/// `http://HOST:PORT/` is `HOST:PORT`, `https://HOST:PORT/` the same over
/// TLS (a port is needed either way: the doctor guesses none).
fn bare_target(typed: &str) -> Result<(String, bool)> {
    let (bare, https) = match typed.strip_prefix("https://") {
        Some(rest) => (rest, true),
        None => (typed.strip_prefix("http://").unwrap_or(typed), false),
    };
    let bare = bare.strip_suffix('/').unwrap_or(bare);
    if bare.contains('/') {
        bail!("{typed}: give HOST:PORT, and a path with --path");
    }
    Ok((bare.to_string(), https))
}

/// The checks the words name, in the report's order; when no word names
/// one, the HTTP/1.1 checks, and the HTTP/2 ones too where the target may
/// speak it (`http2`: TLS, or `--h2c`).
fn checks_named(words: Vec<&str>, http2: bool) -> Result<Vec<Check>> {
    let mut checks = Vec::new();
    for word in words {
        let check = Check::named(word)
            .with_context(|| format!("unknown check {word:?} (the checks: {})", Check::names()))?;
        checks.push(check);
    }
    Ok(if checks.is_empty() {
        Check::ALL
            .into_iter()
            .filter(|check| http2 || !check.is_http2())
            .collect()
    } else {
        Check::ALL
            .into_iter()
            .filter(|check| checks.contains(check))
            .collect()
    })
}
