//! Graceful shutdown and drain: one deploy, four ways of handling SIGTERM,
//! and what each costs in failed requests.
//!
//! A real server process (this crate's own binary, `__server`, see
//! [`server`]) sits behind a small readiness-polling balancer ([`balancer`])
//! next to a healthy peer. Steady traffic flows through the balancer, a few
//! long requests and server-sent-event streams are pinned to the server
//! ([`clients`]), and then the lab does what an orchestrator does: SIGTERM, a
//! grace period, SIGKILL ([`deploy`]). Every request is timed and classified;
//! the server logs its own shutdown steps on the same clock ([`events`]);
//! afterwards the lab opens the server's SQLite file and checks that every
//! write it acknowledged is there ([`timeline`]). Then the same deploy
//! through a link delay, where a pooled connection can meet the server's
//! close ([`idle_close`]). Last, the [`probe`] that readers point at their
//! own servers runs on the lab's own.

pub mod app;
pub mod balancer;
pub mod clients;
pub mod config;
pub mod deploy;
pub mod events;
pub mod idle_close;
pub mod init;
pub mod pid_one;
pub mod probe;
pub mod probe_report;
pub mod server;
pub mod timeline;

/// The guarded child process, now in the kit; re-exported under its old
/// path for the tests and tools that name `lab_shutdown_drain::child`.
pub use lab_kit::child;

pub use config::{Config, production, server_exe};
pub use deploy::run_deploy;
pub use timeline::DeployCase;
pub use timeline::{Deploy, DeploySummary, write_deploy};

use std::process::ExitCode;

use anyhow::{Context, Result, ensure};
use lab_kit::{Output, Series, lab::Subcommand, net::free_loopback_port};

use crate::{
    idle_close::{BeforeClose, idle_close_race},
    pid_one::pid_one,
    probe_report::ShutdownProbeReport,
    server::ShutdownStyle,
};

/// The whole lab: every deploy as timeline samples and a summary, then the
/// probe on the lab's own server, with and without a SIGTERM handler.
async fn run(config: &Config, out: &mut Output) -> Result<()> {
    ensure!(
        config.hard_deadline_ms < config.termination_grace_ms,
        "the hard deadline must be below the orchestrator's grace period"
    );
    for case in DeployCase::ALL {
        let name = case.series();
        eprintln!("shutdown-drain: deploy with {name}");
        let deploy = run_deploy(case, config)
            .await
            .with_context(|| format!("deploy {name}"))?;
        write_deploy(&deploy, out)?;
        eprintln!(
            "shutdown-drain: {name}: {} of {} requests failed, exit {} after {:.0} ms",
            deploy.summary.failed,
            deploy.summary.requests,
            deploy.summary.exit,
            deploy.summary.time_to_exit_ms
        );
    }
    // Two parts that wait on timers, side by side: the idle-close race
    // through a link delay, and the server started as PID 1.
    eprintln!(
        "shutdown-drain: the idle-close race ({} deploys through a {} ms link) and PID 1",
        BeforeClose::ALL.len(),
        config.race_link_delay_ms
    );
    let (race, starts) = tokio::join!(idle_close_race(config), pid_one(config));
    for (case, summary) in race.context("the idle-close race")? {
        eprintln!(
            "shutdown-drain: {}: {} 502s on pooled connections, {} on new ones, of {} requests",
            case.series(),
            summary.pooled_502,
            summary.new_connection_502,
            summary.requests
        );
        out.write_summary(&case.series(), &summary)?;
    }
    for (start, summary) in starts.context("PID 1 and signals")? {
        eprintln!(
            "shutdown-drain: {}: the server {} SIGTERM; exit {} after {:.0} ms",
            start.series(),
            if summary.server_got_sigterm {
                "got"
            } else {
                "never got"
            },
            summary.exit_code,
            summary.time_to_exit_ms
        );
        out.write_summary(&start.series(), &summary)?;
    }
    let slow = AtSigterm {
        path: "/slow".into(),
        count: config.slow_requests,
    };
    let blocked = |ms: u64| AtSigterm {
        path: format!("/report?ms={ms}"),
        count: config.blocking_reports,
    };
    let probes = [
        (
            ShutdownStyle::ExitAtOnce.series(),
            ShutdownStyle::ExitAtOnce,
            slow.clone(),
        ),
        (ShutdownStyle::Full.series(), ShutdownStyle::Full, slow),
        (
            "blocked/report-within-grace".to_string(),
            ShutdownStyle::Full,
            blocked(config.report_within_grace_ms),
        ),
        (
            "blocked/report-past-grace".to_string(),
            ShutdownStyle::Full,
            blocked(config.report_past_grace_ms),
        ),
    ];
    for (series, style, in_flight) in probes {
        eprintln!(
            "shutdown-drain: probe on the {} server ({series})",
            style.name()
        );
        let report = probe_own_server(style, config, &in_flight)
            .await
            .with_context(|| format!("probing the {} server ({series})", style.name()))?;
        // The record keeps the numbers; the sentences stay on stderr.
        let mut fields = serde_json::to_value(&report).context("encoding the probe report")?;
        if let Some(map) = fields.as_object_mut() {
            map.remove("verdict");
            map.remove("command");
        }
        eprintln!("{}", report.verdict);
        out.write_summary(&series, &fields)?;
    }
    Ok(())
}

/// The requests a probe keeps in flight at SIGTERM.
#[derive(Debug, Clone)]
pub struct AtSigterm {
    pub path: String,
    pub count: usize,
}

/// Runs the probe on the lab's own server, as a user would run it on theirs.
pub async fn probe_own_server(
    style: ShutdownStyle,
    config: &Config,
    in_flight: &AtSigterm,
) -> Result<ShutdownProbeReport> {
    let scratch = tempfile::tempdir().context("creating a temp dir")?;
    // A port that was free a moment ago (the probe checks again).
    let port = free_loopback_port()?.to_string();
    let db = scratch.path().join("probe.db").display().to_string();
    let warmup = config.warmup_ms.to_string();
    let grace = config.termination_grace_ms.to_string();
    let count = in_flight.count.to_string();
    let probe_flags = [
        "--port",
        &port,
        "--slow-path",
        &in_flight.path,
        "--in-flight",
        &count,
    ];
    let probe_flags = probe_flags
        .into_iter()
        .chain(["--warmup-ms", &warmup, "--grace-ms", &grace]);
    let exe = config.server_exe.display().to_string();
    let server = [exe.as_str(), "__server", "--style", style.name()];
    let server = server.into_iter().chain(["--port", &port, "--db", &db]);
    let args: Vec<String> = probe_flags
        .chain(["--"])
        .chain(server)
        .map(String::from)
        .chain(config.server_timing_args())
        .collect();
    probe::probe(&probe::parse_args(&args)?).await
}

/// The lab binary's `main`; `src/main.rs` only calls it. It lives in the
/// library because the binary crate is where generic code is compiled at
/// opt-level 3 a second time: with `main` in the binary, each lab's binary
/// took 8 to 24 s to compile; with it here, under half a second
/// (ARCHITECTURE.md, "Timings and build profiles").
pub fn main() -> ExitCode {
    lab_kit::cli::run_lab::<Config>()
}

/// The commands of the lab's binary besides the lab.
const SUBCOMMANDS: &[Subcommand] = &[
    Subcommand::new(
        "probe",
        "how any server shuts down behind a readiness balancer (probe --help)",
        // 0 clean, 1 a problem found, 2 could not probe (one error line).
        |args| crate::probe::probe_main(args).into(),
    ),
    // Before any runtime: the namespace helper and the init are single
    // threaded, as `unshare(CLONE_NEWUSER)` and `sigwaitinfo` need.
    Subcommand::new(
        "__pid1",
        "a command as PID 1 of a new PID namespace",
        |args| helper_exit("pid 1", crate::init::pid1_main(args)),
    ),
    Subcommand::new("__init", "the lab's tini-style init", |args| {
        helper_exit("init", crate::init::init_main(args))
    }),
    Subcommand::new("__server", "the server each deploy starts", server_main),
];

/// `__server`: exits with the server's code, through `process::exit` and not
/// a return: a server that hit its deadline must not wait for the tasks it
/// gave up on.
fn server_main(args: &[String]) -> ExitCode {
    match crate::server::server_main(args) {
        Ok(code) => std::process::exit(code),
        Err(error) => lab_kit::exit::exit_code("server", Err(error)),
    }
}

/// Exits with a helper's code (its command's, passed on), or prints its
/// error in one line and exits 2.
fn helper_exit(program: &str, result: Result<i32>) -> ExitCode {
    match result {
        Ok(code) => lab_kit::exit::Exit::passed_on(Some(code)),
        Err(error) => lab_kit::exit::exit_code(program, Err(error)),
    }
}
