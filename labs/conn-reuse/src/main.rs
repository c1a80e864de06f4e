//! Run with: `cargo xtask lab conn-reuse` (or `cargo run -p lab-conn-reuse -- --quick`).

use std::{process::ExitCode, time::Duration};

use lab_kit::cli::{LabInfo, run_lab};

fn main() -> ExitCode {
    let info = LabInfo {
        slug: lab_conn_reuse::SLUG,
        about: "how many TCP connections five reqwest client setups open for the same requests",
        quick_budget: Duration::from_secs(30),
        full_budget: Duration::from_secs(300),
    };
    run_lab(info, |mode, mut out| async move {
        let config = lab_conn_reuse::Config::for_mode(mode);
        lab_conn_reuse::run(mode, &config, &mut out).await
    })
}
