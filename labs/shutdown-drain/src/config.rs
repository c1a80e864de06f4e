//! What one run of the lab measures: the production values its timings are
//! scaled down from, the config for a mode, and where the server binary is.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Result;
use lab_kit::{Lab, Mode, Output, lab::Subcommand};
use serde::{Deserialize, Serialize};

use crate::balancer::ReadinessBalancerConfig;

/// The production values the lab's timings are scaled down from (Kubernetes
/// defaults and common settings), in milliseconds.
pub mod production {
    /// Readiness probe `periodSeconds` (failureThreshold 1 in this lab).
    pub const READINESS_PERIOD_MS: u64 = 5_000;
    /// How long the server keeps serving after SIGTERM with readiness at 503
    /// (an in-app sleep; a preStop hook can wait instead, see deploy/pod.yaml).
    pub const DRAIN_WAIT_MS: u64 = 10_000;
    /// The server's own hard deadline after SIGTERM.
    pub const HARD_DEADLINE_MS: u64 = 25_000;
    /// SIGTERM to SIGKILL: `terminationGracePeriodSeconds` (the default, 30 s)
    /// minus the preStop hook's time, none in deploy/pod.yaml.
    pub const TERMINATION_GRACE_MS: u64 = 30_000;
    /// A long request in flight at SIGTERM (a report, an upload).
    pub const SLOW_MS: u64 = 20_000;
    /// Inline reports that hold a worker thread at SIGTERM: one that ends
    /// well within the grace period, one that outlasts it.
    pub const REPORT_WITHIN_GRACE_MS: u64 = 10_000;
    pub const REPORT_PAST_GRACE_MS: u64 = 40_000;

    // The one order the lab cannot run without: checked when the crate compiles.
    const _: () = assert!(
        HARD_DEADLINE_MS < TERMINATION_GRACE_MS,
        "the hard deadline must be below the grace period"
    );
    const _: () = assert!(
        REPORT_WITHIN_GRACE_MS + DRAIN_WAIT_MS < TERMINATION_GRACE_MS
            && REPORT_PAST_GRACE_MS > TERMINATION_GRACE_MS,
        "one report must end within the grace period, the other outlast it"
    );
}

/// What one run measures. Times in milliseconds, already scaled.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// Production time divided by lab time (25 means 30 s ran as 1.2 s).
    pub time_scale: f64,
    pub readiness_period_ms: u64,
    pub drain_wait_ms: u64,
    pub hard_deadline_ms: u64,
    pub termination_grace_ms: u64,
    pub slow_ms: u64,
    /// The interval between events on a stream (not scaled).
    pub stream_tick_ms: u64,
    /// One `/work` request through the balancer every this many ms.
    pub traffic_interval_ms: u64,
    /// Traffic before SIGTERM.
    pub warmup_ms: u64,
    /// Traffic after the server has exited.
    pub after_exit_ms: u64,
    /// Long requests pinned to the server and in flight at SIGTERM.
    pub slow_requests: usize,
    /// Polite streams (they leave when told) pinned to the server.
    pub streams: usize,
    /// A client gives up on a short request after this long.
    pub request_timeout_ms: u64,
    /// The blocked-runtime probes: inline reports in flight at SIGTERM (one
    /// per worker thread of the server), and how long each holds its worker.
    pub blocking_reports: usize,
    pub report_within_grace_ms: u64,
    pub report_past_grace_ms: u64,
    /// The idle-close race at deploy time: the keep-alive lab's link-delay
    /// shim between the balancer and the server, one way, lab ms; and the
    /// steady traffic's interval in that part (faster than the deploys', so
    /// the race's window of two link delays holds several requests).
    pub race_link_delay_ms: u64,
    pub race_traffic_interval_ms: u64,
    /// The lab binary, run as `__server` (not part of the meta record; after
    /// `--set`, this binary).
    #[serde(skip_serializing, default = "server_exe")]
    pub server_exe: PathBuf,
}

impl Lab for Config {
    const MANIFEST: &str = include_str!("../Cargo.toml");

    const SUBCOMMANDS: &[Subcommand] = crate::SUBCOMMANDS;

    fn for_mode(mode: Mode) -> Config {
        let time_scale: u64 = mode.pick(25, 5);
        let scaled = |millis: u64| millis / time_scale;
        let readiness_period_ms = scaled(production::READINESS_PERIOD_MS);
        Config {
            time_scale: time_scale as f64,
            readiness_period_ms,
            drain_wait_ms: scaled(production::DRAIN_WAIT_MS),
            hard_deadline_ms: scaled(production::HARD_DEADLINE_MS),
            termination_grace_ms: scaled(production::TERMINATION_GRACE_MS),
            slow_ms: scaled(production::SLOW_MS),
            stream_tick_ms: 50,
            traffic_interval_ms: 20,
            // Traffic starts right after the poll that saw both backends
            // ready, and the warm-up is a whole number of poll periods: SIGTERM
            // lands just after a poll, so the balancer learns of it one full
            // period later. The worst case, on purpose, in every run.
            warmup_ms: 2 * readiness_period_ms,
            after_exit_ms: 2 * readiness_period_ms + 100,
            slow_requests: 3,
            streams: 2,
            request_timeout_ms: 3_000,
            blocking_reports: 2,
            report_within_grace_ms: scaled(production::REPORT_WITHIN_GRACE_MS),
            report_past_grace_ms: scaled(production::REPORT_PAST_GRACE_MS),
            // Larger than life (a datacenter's round trip is under a
            // millisecond), as in the keep-alive lab: the window is two link
            // delays, here 60 ms of lab time, which at one request every 4 ms
            // (half of them to the server) holds about 7 requests per
            // deploy, and stays well below the readiness period (the polls
            // cross the link too) and the drain wait.
            race_link_delay_ms: 30,
            race_traffic_interval_ms: 4,
            server_exe: server_exe(),
        }
    }

    fn time_scale(&self) -> f64 {
        self.time_scale
    }

    async fn run(&self, out: &mut Output) -> Result<()> {
        crate::run(self, out).await
    }
}

impl Config {
    /// How the balancer in front of the server polls readiness.
    pub fn balancer(&self) -> ReadinessBalancerConfig {
        ReadinessBalancerConfig {
            poll_period: Duration::from_millis(self.readiness_period_ms),
            poll_timeout: Duration::from_millis(self.readiness_period_ms / 2),
            failure_threshold: 1,
            ready_path: "/readyz",
        }
    }

    /// The server child's timing flags, the same for a deploy and for the
    /// probe run of the lab's own server, so the two cannot drift apart.
    pub fn server_timing_args(&self) -> Vec<String> {
        vec![
            "--drain-wait-ms".into(),
            self.drain_wait_ms.to_string(),
            "--deadline-ms".into(),
            self.hard_deadline_ms.to_string(),
            "--slow-ms".into(),
            self.slow_ms.to_string(),
        ]
    }
}

/// Where the lab's own binary is: `LAB_SHUTDOWN_DRAIN_EXE` if set; this
/// process if it is the lab; else `lab-shutdown-drain` beside the running
/// executable or one folder up (a test binary lives in `target/*/deps/`).
pub fn server_exe() -> PathBuf {
    if let Some(path) = std::env::var_os("LAB_SHUTDOWN_DRAIN_EXE") {
        return PathBuf::from(path);
    }
    let Ok(current) = std::env::current_exe() else {
        return PathBuf::from("lab-shutdown-drain");
    };
    let is_lab = current
        .file_name()
        .is_some_and(|name| name.to_string_lossy() == "lab-shutdown-drain");
    if is_lab {
        return current;
    }
    let beside = |dir: Option<&Path>| dir.map(|dir| dir.join("lab-shutdown-drain"));
    let parent = current.parent();
    [beside(parent), beside(parent.and_then(Path::parent))]
        .into_iter()
        .flatten()
        .find(|path| path.is_file())
        .unwrap_or_else(|| PathBuf::from("lab-shutdown-drain"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seconds a `preStop` hook of `manifest` sleeps: the exec form
    /// (`command: ["sleep", "N"]`) or Kubernetes' built-in sleep action
    /// (`sleep: { seconds: N }`); 0 without a hook. Comment lines do not count.
    fn pre_stop_sleep_seconds(manifest: &str) -> u64 {
        let mut lines = manifest
            .lines()
            .map(|line| line.split('#').next().unwrap_or_default())
            .filter(|line| !line.trim().is_empty())
            .skip_while(|line| line.trim() != "preStop:");
        let Some(hook) = lines.next() else {
            return 0;
        };
        let hook_indent = hook.len() - hook.trim_start().len();
        let body: String = lines
            .take_while(|line| line.len() - line.trim_start().len() > hook_indent)
            .collect();
        let digits = |text: &str| -> u64 {
            let number: String = text
                .trim_start_matches(|c: char| !c.is_ascii_digit())
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            number
                .parse()
                .unwrap_or_else(|_| panic!("no number of seconds in the preStop hook: {body}"))
        };
        if let Some((_, after)) = body.split_once("\"sleep\"") {
            digits(after)
        } else if let Some((_, after)) = body.split_once("seconds:") {
            digits(after)
        } else {
            panic!("a preStop hook the test cannot read (not a sleep): {body}")
        }
    }

    #[test]
    fn reads_the_pre_stop_sleep_of_a_manifest() {
        let exec = "lifecycle:\n  preStop:\n    exec: { command: [\"sleep\", \"10\"] }\n";
        assert_eq!(pre_stop_sleep_seconds(exec), 10);
        let builtin = "  preStop:\n    sleep:\n      seconds: 7\n";
        assert_eq!(pre_stop_sleep_seconds(builtin), 7);
        let commented = "      # preStop:\n      #   exec: { command: [\"sleep\", \"10\"] }\n";
        assert_eq!(pre_stop_sleep_seconds(commented), 0);
    }

    /// The first `key: N` of `manifest` outside comments.
    fn manifest_number(manifest: &str, key: &str) -> u64 {
        manifest
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                (name.trim() == key).then(|| value.split('#').next()?.trim().parse().ok())?
            })
            .unwrap_or_else(|| panic!("{key} is not in the manifest"))
    }

    /// Kubernetes starts `terminationGracePeriodSeconds` when it deletes the
    /// pod, runs the preStop hook inside it, and sends SIGTERM only when the
    /// hook returns: the app's time from SIGTERM to SIGKILL is the grace
    /// period minus the hook. That is the time the lab plays, and the hard
    /// deadline (counted from SIGTERM) must end inside it.
    fn assert_shutdown_fits(manifest: &str, which: &str) {
        let grace_ms = manifest_number(manifest, "terminationGracePeriodSeconds") * 1000;
        let pre_stop_ms = pre_stop_sleep_seconds(manifest) * 1000;
        assert!(
            pre_stop_ms + production::HARD_DEADLINE_MS < grace_ms,
            "{which}: a {pre_stop_ms} ms preStop hook plus the app's {} ms hard deadline does \
             not fit in a {grace_ms} ms grace period: SIGKILL would come first",
            production::HARD_DEADLINE_MS
        );
        assert_eq!(
            grace_ms - pre_stop_ms,
            production::TERMINATION_GRACE_MS,
            "{which}: SIGTERM to SIGKILL (grace period minus preStop) is what the lab plays"
        );
    }

    /// The manifest the chapter shows and the lab's production values agree,
    /// and so does the preStop alternative its comment spells out.
    #[test]
    fn the_manifest_matches_the_production_values() {
        let manifest = include_str!("../deploy/pod.yaml");
        assert_shutdown_fits(manifest, "the manifest");
        assert_eq!(
            manifest_number(manifest, "periodSeconds") * 1000,
            production::READINESS_PERIOD_MS,
            "the first periodSeconds is the readiness probe's"
        );
        // The alternative is written as comment lines that start with `#   `.
        let alternative: String = manifest
            .lines()
            .filter_map(|line| line.trim_start().strip_prefix("#   "))
            .map(|line| format!("{line}\n"))
            .collect();
        assert_ne!(
            pre_stop_sleep_seconds(&alternative),
            0,
            "the commented alternative has a preStop hook: {alternative}"
        );
        assert_shutdown_fits(&alternative, "the commented preStop alternative");
    }

    #[test]
    fn quick_mode_scales_every_production_time_by_one_factor() {
        let config = Config::for_mode(Mode::Quick);
        let scale = config.time_scale as u64;
        assert_eq!(
            config.termination_grace_ms * scale,
            production::TERMINATION_GRACE_MS
        );
        assert_eq!(
            config.hard_deadline_ms * scale,
            production::HARD_DEADLINE_MS
        );
        assert_eq!(config.drain_wait_ms * scale, production::DRAIN_WAIT_MS);
        assert_eq!(
            config.readiness_period_ms * scale,
            production::READINESS_PERIOD_MS
        );
    }
}
