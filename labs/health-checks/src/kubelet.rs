//! A prober that does what a kubelet does with an `httpGet` probe: one GET
//! every `period` on a fresh connection, a failure when it takes longer than
//! `timeout` or answers outside 200..400, and a decision after
//! `failure_threshold` failures (or `success_threshold` successes) in a row.
//! What the decision is depends on the probe: liveness restarts the
//! container, readiness takes the pod out of (or puts it back into) the
//! endpoints a balancer routes to.
//!
//! Simplification: a liveness prober here records the moment the kubelet
//! would restart the container and, as the kubelet does after a restart,
//! starts counting failures from zero, but it leaves the process running.
//! What a restart costs (the time to start, the connections it reopens) is
//! the fleet simulation's part ([`crate::fleet`]).

use std::time::Duration;

use anyhow::Result;
use lab_kit::clock::monotonic_ms;
use tokio::time::{Instant, MissedTickBehavior};

/// What a probe's verdict drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    /// Failures restart the container.
    Liveness,
    /// Failures take the pod out of rotation; successes put it back.
    Readiness,
}

/// One probe as a pod spec declares it (times already scaled).
#[derive(Debug, Clone)]
pub struct KubeletProbe {
    pub kind: ProbeKind,
    pub path: &'static str,
    pub period: Duration,
    pub timeout: Duration,
    pub failure_threshold: u32,
    pub success_threshold: u32,
}

/// One probe request. Times are CLOCK_MONOTONIC ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeAttempt {
    pub start_ms: f64,
    pub end_ms: f64,
    pub passed: bool,
}

/// Everything one prober saw and decided.
#[derive(Debug, Clone, Default)]
pub struct ProbeLog {
    pub attempts: Vec<ProbeAttempt>,
    /// Liveness: when the kubelet would have restarted the container.
    pub restarts_ms: Vec<f64>,
    /// Readiness: when the pod went out of rotation (`false`) or back (`true`).
    pub routing_changes: Vec<(f64, bool)>,
}

/// Probes `base_url` + `probe.path` from `start` until `until`. The pod is
/// taken as ready at the start (it was already serving).
pub async fn run_prober(
    probe: KubeletProbe,
    base_url: String,
    start: Instant,
    until: Instant,
) -> Result<ProbeLog> {
    // A fresh connection per probe, as the kubelet makes: no pool.
    let client = lab_kit::client::fresh_connection_client("the prober's client")?;
    let url = format!("{base_url}{}", probe.path);
    let mut ticker = tokio::time::interval_at(start, probe.period);
    // A probe that runs late does not make the next ones bunch up.
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut log = ProbeLog::default();
    let mut verdicts = Verdicts::new(&probe);
    // ANCHOR: prober
    loop {
        let tick = ticker.tick().await;
        if tick >= until {
            break;
        }
        let start_ms = monotonic_ms();
        let answered = client.get(&url).timeout(probe.timeout).send().await;
        let passed =
            matches!(&answered, Ok(response) if (200..400).contains(&response.status().as_u16()));
        let end_ms = monotonic_ms();
        log.attempts.push(ProbeAttempt {
            start_ms,
            end_ms,
            passed,
        });
        match verdicts.after(passed) {
            Some(Decision::Restart) => log.restarts_ms.push(end_ms),
            Some(Decision::StopRouting) => log.routing_changes.push((end_ms, false)),
            Some(Decision::StartRouting) => log.routing_changes.push((end_ms, true)),
            None => {}
        }
    }
    // ANCHOR_END: prober
    Ok(log)
}

/// What a run of probe results makes the kubelet do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Liveness: kill the container and start it again.
    Restart,
    /// Readiness: out of the endpoints.
    StopRouting,
    /// Readiness: back in.
    StartRouting,
}

/// The kubelet's counting for one probe: results in a row, and (readiness)
/// whether the pod is routed to. The pod starts routed (it was serving).
#[derive(Debug, Clone)]
pub struct Verdicts {
    kind: ProbeKind,
    failure_threshold: u32,
    success_threshold: u32,
    failures: u32,
    successes: u32,
    routed: bool,
}

impl Verdicts {
    pub fn new(probe: &KubeletProbe) -> Verdicts {
        Verdicts {
            kind: probe.kind,
            failure_threshold: probe.failure_threshold.max(1),
            success_threshold: probe.success_threshold.max(1),
            failures: 0,
            successes: 0,
            routed: true,
        }
    }

    // ANCHOR: decide
    /// Counts one result; a decision when a threshold is reached.
    pub fn after(&mut self, passed: bool) -> Option<Decision> {
        if passed {
            (self.failures, self.successes) = (0, self.successes + 1);
        } else {
            (self.failures, self.successes) = (self.failures + 1, 0);
        }
        match self.kind {
            ProbeKind::Liveness if self.failures >= self.failure_threshold => {
                // The kubelet kills the container; counting starts over.
                self.failures = 0;
                Some(Decision::Restart)
            }
            // Readiness has hysteresis: a run of failures to leave, a run of
            // successes to come back, and nothing restarts.
            ProbeKind::Readiness if self.routed && self.failures >= self.failure_threshold => {
                self.routed = false;
                Some(Decision::StopRouting)
            }
            ProbeKind::Readiness if !self.routed && self.successes >= self.success_threshold => {
                self.routed = true;
                Some(Decision::StartRouting)
            }
            _ => None,
        }
    }
    // ANCHOR_END: decide
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(kind: ProbeKind, failure_threshold: u32, success_threshold: u32) -> KubeletProbe {
        KubeletProbe {
            kind,
            path: "/",
            period: Duration::from_millis(100),
            timeout: Duration::from_millis(10),
            failure_threshold,
            success_threshold,
        }
    }

    fn decisions(probe: &KubeletProbe, results: &str) -> Vec<Option<Decision>> {
        let mut verdicts = Verdicts::new(probe);
        results
            .chars()
            .map(|result| verdicts.after(result == '+'))
            .collect()
    }

    #[test]
    fn liveness_restarts_after_failures_in_a_row_and_counts_again() {
        let liveness = probe(ProbeKind::Liveness, 3, 1);
        let seen = decisions(&liveness, "--+---+------");
        let restarts: Vec<usize> = seen
            .iter()
            .enumerate()
            .filter(|(_, decision)| **decision == Some(Decision::Restart))
            .map(|(index, _)| index)
            .collect();
        // A success in between resets the count; after a restart it starts over.
        assert_eq!(restarts, [5, 9, 12]);
    }

    #[test]
    fn readiness_leaves_and_comes_back_with_hysteresis() {
        let readiness = probe(ProbeKind::Readiness, 3, 2);
        let seen = decisions(&readiness, "+--+---+-++");
        assert_eq!(seen[6], Some(Decision::StopRouting));
        // One success is not enough to come back; two in a row are.
        assert_eq!(seen[7], None);
        assert_eq!(seen[10], Some(Decision::StartRouting));
        let changes = seen.iter().flatten().count();
        assert_eq!(changes, 2, "{seen:?}");
    }
}
