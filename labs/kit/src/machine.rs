//! What a run says about the machine it ran on, so every chart caption can
//! name it: a number from a laptop and one from a 2-core CI box differ.

use std::{collections::BTreeMap, fs, thread};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub os: String,
    pub kernel: String,
    pub rustc: String,
    /// Versions of the HTTP crates the labs were built with: the versions the
    /// workspace's own packages depend on in Cargo.lock (not other versions
    /// that only a dependency pulls in).
    pub crates: BTreeMap<String, String>,
}

impl Machine {
    /// Reads this machine's description from /proc and /etc, and the build's
    /// versions from what build.rs baked in.
    pub fn collect() -> Machine {
        let cpu = fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|line| line.starts_with("model name"))
                    .and_then(|line| line.split_once(':'))
                    .map(|(_, model)| squeeze_spaces(model))
            })
            .unwrap_or_else(|| std::env::consts::ARCH.to_string());
        let cores = thread::available_parallelism()
            .map(|count| count.get())
            .unwrap_or(1);
        let os = fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|line| line.strip_prefix("PRETTY_NAME="))
                    .map(|name| name.trim_matches('"').to_string())
            })
            .unwrap_or_else(|| std::env::consts::OS.to_string());
        let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|text| text.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        let crates = env!("LAB_KIT_CRATES")
            .split(';') // build.rs: "name=version;...", a version may hold ", "
            .filter_map(|pair| pair.split_once('='))
            .map(|(name, version)| (name.to_string(), version.to_string()))
            .collect();
        Machine {
            cpu,
            cores,
            os,
            kernel,
            rustc: env!("LAB_KIT_RUSTC").to_string(),
            crates,
        }
    }

    /// One short line for a chart caption.
    pub fn caption(&self) -> String {
        format!("{} ({} cores), Linux {}", self.cpu, self.cores, self.kernel)
    }
}

fn squeeze_spaces(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knows_the_http_crates_it_was_built_with() {
        let machine = Machine::collect();
        assert!(machine.cores >= 1);
        assert!(machine.rustc.starts_with("rustc "), "{}", machine.rustc);
        for name in ["axum", "hyper", "reqwest", "tokio"] {
            assert!(
                machine.crates.contains_key(name),
                "{name} missing from {:?}",
                machine.crates
            );
        }
    }
}
