//! The doctor against the tool people already use for slow clients:
//! slowhttptest's slowloris mode and the doctor's slow-head check, side by
//! side on one nginx with `client_header_timeout` set. Both need programs
//! the book does not depend on; where either is missing the comparison is
//! skipped with one line.

use std::{
    io::Read,
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use lab_kit::{child::ChildGuard, nginx::Nginx};
use serde::Serialize;

use crate::{
    checks::{Patient, watch},
    options,
};

/// Where a program is and which version it is: the kit's, shared with the
/// server-timeouts lab's nginx.
pub use lab_kit::nginx::{find, version_in, version_of};

/// nginx's header timeout in the comparison. slowhttptest counts whole
/// seconds, and its count of the same close varied by one (9 or 10 for a
/// 10 s timeout, in ten runs on a busy machine): at 20 s a one-second step
/// is 5 %.
pub const HEADER_TIMEOUT_S: u64 = 20;
/// How long slowhttptest runs and the doctor watches.
const LENGTH_S: u64 = 30;

/// What the two tools measured.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub server: String,
    pub configured_s: f64,
    pub doctor_s: f64,
    pub slowhttptest_s: f64,
    /// |doctor - slowhttptest| / slowhttptest, percent.
    pub difference_pct: f64,
    pub nginx_version: String,
    pub slowhttptest_version: String,
}

/// `Some(reason)` when the comparison cannot run here.
pub fn missing() -> Option<String> {
    let absent: Vec<&str> = ["nginx", "slowhttptest"]
        .into_iter()
        .filter(|program| find(program).is_none())
        .collect();
    (!absent.is_empty()).then(|| format!("{} not installed", absent.join(" and ")))
}

/// "Test ended on 10th second" in slowhttptest's report, colours and all.
pub fn ended_second(report: &str) -> Option<u64> {
    let after = report.split("Test ended on ").nth(1)?;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

// ANCHOR: compare
pub async fn run() -> Result<Comparison> {
    if let Some(reason) = missing() {
        bail!("{reason}");
    }
    let nginx = Nginx::start(1, |addrs| {
        format!(
            "  client_header_timeout {HEADER_TIMEOUT_S}s;\n  \
             server {{ listen {}; location / {{ return 200 \"ok\\n\"; }} }}",
            addrs[0]
        )
    })
    .await?;
    let addr = nginx.addrs()[0];
    let mut command = Command::new(find("slowhttptest").context("slowhttptest")?);
    command
        .current_dir(nginx.dir())
        .args(["-c", "1", "-H", "-i", "2", "-r", "1", "-l"])
        .arg(LENGTH_S.to_string())
        .arg("-u")
        .arg(format!("http://{addr}/"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut slowhttptest = ChildGuard::spawn_command(command)?;
    let mut stdout = slowhttptest
        .take_stdout()
        .context("slowhttptest's stdout")?;
    let reading = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    // The doctor's slow head, at the same time, on its own connection.
    let mut doctor = options::parse(&[addr.to_string()])?;
    doctor.window = Duration::from_secs(LENGTH_S);
    let patient = Patient::plain(addr, doctor);
    let finding = watch::slow_head(&patient).await?;
    let ended = slowhttptest
        .wait_for(Duration::from_secs(LENGTH_S + 15))
        .await?
        .context("slowhttptest did not end within its test length plus 15 s")?;
    let report = reading.join().unwrap_or_default();
    let slowhttptest_s = ended_second(&report).with_context(|| {
        format!(
            "slowhttptest ({}) printed no \"Test ended on\"",
            ended.describe()
        )
    })? as f64;
    let doctor_s = finding
        .value
        .filter(|_| finding.grade == crate::Grade::Pass)
        .with_context(|| format!("the doctor's slow head: {}", finding.measured))?;
    let nginx_version = nginx.version.clone();
    Ok(Comparison {
        server: format!("nginx {nginx_version}, client_header_timeout {HEADER_TIMEOUT_S}s"),
        nginx_version,
        slowhttptest_version: version_of("slowhttptest", &["-h"]).await,
        configured_s: HEADER_TIMEOUT_S as f64,
        doctor_s,
        slowhttptest_s,
        difference_pct: (doctor_s - slowhttptest_s).abs() / slowhttptest_s * 100.0,
    })
}
// ANCHOR_END: compare
