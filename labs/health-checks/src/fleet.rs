//! Why a liveness check must not test the database, at the scale of a fleet:
//! a small, deterministic simulation of pods whose database turns slow for a
//! while.
//!
//! This is a simulation, not a measurement: one machine cannot run a fleet,
//! a kubelet and a database under load in seconds. Its rules are few and
//! stated in [`FleetConfig`]; the chapter says so next to the chart. (The
//! lab's [`crate::slow_dependency`] experiment measures one pod for real.)
//!
//! The rules: every pod is probed every `probe_period_s` (pods staggered
//! evenly across the period); a probe fails when the liveness check touches the
//! database and the database is slow; `failure_threshold` failures in a row
//! restart the pod, which then serves nothing for `restart_s`; when at least
//! half the fleet comes back within one probe period, their connection pools
//! open at once and keep the database slow for `reconnect_storm_s` more.

use anyhow::Result;
use lab_kit::{Output, Series};
use serde::Serialize;

use crate::LivenessCheck;

/// The fleet and the incident. FleetSeconds of simulated time.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct FleetConfig {
    pub pods: usize,
    pub duration_s: u32,
    /// The database is slow (a probe that touches it times out) from here...
    pub db_slow_from_s: u32,
    /// ...to here, unless reconnect storms prolong it.
    pub db_slow_until_s: u32,
    pub probe_period_s: u32,
    pub failure_threshold: u32,
    /// From the kill to serving again: start, warm up, connect.
    pub restart_s: u32,
    pub reconnect_storm_s: u32,
}

impl Default for FleetConfig {
    fn default() -> FleetConfig {
        FleetConfig {
            pods: 10,
            duration_s: 300,
            db_slow_from_s: 60,
            db_slow_until_s: 150,
            // The same Kubernetes liveness defaults the measured probers use.
            probe_period_s: (crate::production::LIVENESS.period_ms / 1000) as u32,
            failure_threshold: crate::production::LIVENESS.failure_threshold,
            restart_s: 30,
            reconnect_storm_s: 20,
        }
    }
}

/// One second of the simulation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FleetSecond {
    pub t_s: u32,
    pub pods_serving: u32,
    pub db_slow: bool,
}

/// The incident's cost under one liveness check.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FleetSummary {
    pub restarts: u32,
    /// Pod-seconds spent restarting instead of serving.
    pub pod_seconds_lost: u32,
    /// FleetSeconds with no pod serving at all.
    pub full_outage_s: u32,
    /// FleetSeconds the database was slow (the incident, plus any storms).
    pub db_slow_s: u32,
    /// The last second the database was slow.
    pub db_recovered_at_s: u32,
}

/// Runs the simulation for one liveness check.
pub fn simulate(config: &FleetConfig, check: LivenessCheck) -> (Vec<FleetSecond>, FleetSummary) {
    let pods = config.pods.max(1);
    let mut restarting_until = vec![0u32; pods];
    let mut failures = vec![0u32; pods];
    let mut slow_until = config.db_slow_until_s;
    let mut came_back: Vec<u32> = Vec::new();
    let mut seconds = Vec::with_capacity(config.duration_s as usize);
    let mut summary = FleetSummary {
        restarts: 0,
        pod_seconds_lost: 0,
        full_outage_s: 0,
        db_slow_s: 0,
        db_recovered_at_s: 0,
    };
    for t in 0..config.duration_s {
        // Pods whose restart ends now open their pools now.
        for until in &restarting_until {
            if *until == t && t > 0 {
                came_back.push(t);
            }
        }
        came_back.retain(|&at| t - at < config.probe_period_s);
        if came_back.len() * 2 >= pods {
            slow_until = slow_until.max(t + config.reconnect_storm_s);
            came_back.clear();
        }
        let db_slow = t >= config.db_slow_from_s && t < slow_until;
        if db_slow {
            summary.db_slow_s += 1;
            summary.db_recovered_at_s = t + 1;
        }
        for pod in 0..pods {
            if restarting_until[pod] > t {
                continue;
            }
            let offset = (pod as u32 * config.probe_period_s) / pods as u32;
            if t % config.probe_period_s != offset {
                continue;
            }
            let probe_fails = check == LivenessCheck::Database && db_slow;
            failures[pod] = if probe_fails { failures[pod] + 1 } else { 0 };
            if failures[pod] >= config.failure_threshold {
                // The kubelet kills the container; it serves nothing until
                // it has started, warmed up and connected again.
                restarting_until[pod] = t + config.restart_s;
                failures[pod] = 0;
                summary.restarts += 1;
            }
        }
        let serving = restarting_until.iter().filter(|&&until| until <= t).count() as u32;
        summary.pod_seconds_lost += pods as u32 - serving;
        if serving == 0 {
            summary.full_outage_s += 1;
        }
        seconds.push(FleetSecond {
            t_s: t,
            pods_serving: serving,
            db_slow,
        });
    }
    (seconds, summary)
}

/// Writes both liveness checks' timelines and summaries, as `fleet/<check>`.
pub fn write_fleet(config: &FleetConfig, out: &mut Output) -> Result<()> {
    for check in LivenessCheck::ALL {
        let (seconds, summary) = simulate(config, check);
        let series = format!("fleet/{}", check.series());
        for second in &seconds {
            out.write_sample(&series, second)?;
        }
        out.write_summary(&series, &summary)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checking_the_database_restarts_the_fleet_and_prolongs_the_incident() {
        let config = FleetConfig::default();
        let (_, process) = simulate(&config, LivenessCheck::Process);
        let (_, database) = simulate(&config, LivenessCheck::Database);
        assert_eq!(process.restarts, 0);
        assert_eq!(process.pod_seconds_lost, 0);
        assert_eq!(
            process.db_slow_s,
            config.db_slow_until_s - config.db_slow_from_s
        );
        assert!(database.restarts >= config.pods as u32, "{database:?}");
        assert!(database.full_outage_s > 0, "{database:?}");
        assert!(database.db_slow_s > process.db_slow_s, "{database:?}");
    }

    #[test]
    fn a_healthy_database_restarts_nothing_either_way() {
        let config = FleetConfig {
            db_slow_from_s: 0,
            db_slow_until_s: 0,
            ..FleetConfig::default()
        };
        for check in LivenessCheck::ALL {
            assert_eq!(simulate(&config, check).1.restarts, 0);
        }
    }
}
