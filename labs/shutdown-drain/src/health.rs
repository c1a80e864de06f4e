//! Why a liveness check must not test the database: a small, deterministic
//! simulation of a fleet of pods whose database turns slow for a while.
//!
//! This is a simulation, not a measurement: one machine cannot run a fleet,
//! a kubelet and a database under load in seconds. Its rules are few and
//! stated in [`SimulationConfig`]; the chapter says so next to the chart.
//!
//! The rules: every pod is probed every `probe_period_s` (pods staggered
//! evenly across the period); a probe fails when the policy checks the
//! database and the database is slow; `failure_threshold` failures in a row
//! restart the pod, which then serves nothing for `restart_s`; when at least
//! half the fleet comes back within one probe period, their connection pools
//! open at once and keep the database slow for `reconnect_storm_s` more.

use anyhow::Result;
use lab_kit::Output;
use serde::Serialize;

/// The fleet and the incident. Seconds of simulated time.
#[derive(Debug, Clone, Serialize)]
pub struct SimulationConfig {
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

impl Default for SimulationConfig {
    fn default() -> SimulationConfig {
        SimulationConfig {
            pods: 10,
            duration_s: 300,
            db_slow_from_s: 60,
            db_slow_until_s: 150,
            // Kubernetes liveness defaults: every 10 s, 3 failures.
            probe_period_s: 10,
            failure_threshold: 3,
            restart_s: 30,
            reconnect_storm_s: 20,
        }
    }
}

/// What a liveness probe checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The probe runs a query: it fails whenever the database is slow.
    ChecksDatabase,
    /// The probe answers from the process: it fails only if the process is stuck.
    ChecksProcess,
}

impl Policy {
    pub fn series(self) -> &'static str {
        match self {
            Policy::ChecksDatabase => "liveness-checks-db",
            Policy::ChecksProcess => "liveness-checks-process",
        }
    }
}

/// One second of the simulation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Second {
    pub t_s: u32,
    pub pods_serving: u32,
    pub db_slow: bool,
}

/// The incident's cost under one policy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SimulationSummary {
    pub restarts: u32,
    /// Pod-seconds spent restarting instead of serving.
    pub pod_seconds_lost: u32,
    /// Seconds with no pod serving at all.
    pub full_outage_s: u32,
    /// Seconds the database was slow (the incident, plus any storms).
    pub db_slow_s: u32,
    /// The last second the database was slow.
    pub db_recovered_at_s: u32,
}

/// Runs the simulation for one policy.
pub fn simulate(config: &SimulationConfig, policy: Policy) -> (Vec<Second>, SimulationSummary) {
    let pods = config.pods.max(1);
    let mut restarting_until = vec![0u32; pods];
    let mut failures = vec![0u32; pods];
    let mut slow_until = config.db_slow_until_s;
    let mut came_back: Vec<u32> = Vec::new();
    let mut seconds = Vec::with_capacity(config.duration_s as usize);
    let mut summary = SimulationSummary {
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
            let probe_fails = policy == Policy::ChecksDatabase && db_slow;
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
        seconds.push(Second {
            t_s: t,
            pods_serving: serving,
            db_slow,
        });
    }
    (seconds, summary)
}

/// Writes both policies' timelines and summaries.
pub fn write_simulation(config: &SimulationConfig, out: &mut Output) -> Result<()> {
    for policy in [Policy::ChecksDatabase, Policy::ChecksProcess] {
        let (seconds, summary) = simulate(config, policy);
        for second in &seconds {
            out.sample(policy.series(), second)?;
        }
        out.summary_of(policy.series(), &summary)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checking_the_database_restarts_the_fleet_and_prolongs_the_incident() {
        let config = SimulationConfig::default();
        let (_, process) = simulate(&config, Policy::ChecksProcess);
        let (_, database) = simulate(&config, Policy::ChecksDatabase);
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
        let config = SimulationConfig {
            db_slow_from_s: 0,
            db_slow_until_s: 0,
            ..SimulationConfig::default()
        };
        for policy in [Policy::ChecksDatabase, Policy::ChecksProcess] {
            assert_eq!(simulate(&config, policy).1.restarts, 0);
        }
    }
}
