//! The doctor against the tool people already use for slow clients:
//! slowhttptest's slowloris mode and the doctor's slow-head check, side by
//! side on one nginx with `client_header_timeout` set. Both need programs
//! the book does not depend on; where either is missing the comparison is
//! skipped with one line.

use std::{
    io::Read,
    net::SocketAddr,
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use lab_kit::child::ChildGuard;
use serde::Serialize;

use crate::{
    checks::{Probe, watch},
    options,
};

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

/// The path of `program` on PATH (or nginx's usual /usr/sbin), if any.
pub fn find(program: &str) -> Option<std::path::PathBuf> {
    let paths = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&paths)
        .chain([std::path::PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

/// `Some(reason)` when the comparison cannot run here.
pub fn missing() -> Option<String> {
    let absent: Vec<&str> = ["nginx", "slowhttptest"]
        .into_iter()
        .filter(|program| find(program).is_none())
        .collect();
    (!absent.is_empty()).then(|| format!("{} not installed", absent.join(" and ")))
}

fn nginx_config(dir: &Path, port: u16) -> String {
    let dir = dir.display();
    format!(
        "daemon off;\nmaster_process off;\npid {dir}/nginx.pid;\nerror_log {dir}/error.log;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {dir};\n  proxy_temp_path {dir};\n  \
         fastcgi_temp_path {dir};\n  uwsgi_temp_path {dir};\n  scgi_temp_path {dir};\n  \
         client_header_timeout {HEADER_TIMEOUT_S}s;\n  \
         server {{ listen 127.0.0.1:{port}; location / {{ return 200 \"ok\\n\"; }} }}\n}}\n"
    )
}

/// The first version number (`1.22.1`, `v20.20.2` read as `20.20.2`) in a
/// program's banner: `nginx version: nginx/1.22.1`, `node --version`,
/// slowhttptest's usage line.
pub fn version_in(banner: &str) -> Option<String> {
    banner
        .split(|c: char| c.is_whitespace() || c == '/' || c == ',')
        .map(|word| word.strip_prefix('v').unwrap_or(word))
        .find(|word| {
            let parts: Vec<&str> = word.split('.').collect();
            parts.len() >= 2
                && parts
                    .iter()
                    .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit()))
        })
        .map(str::to_string)
}

/// The version `program args` prints (on either stream), read within 5 s;
/// `"unknown"` where it is absent, fails or prints none. The reference data
/// records it beside what was measured, so a page says which Node or nginx
/// behaved so.
pub async fn version_of(program: &str, args: &[&str]) -> String {
    let Some(path) = find(program) else {
        return "unknown".into();
    };
    let mut command = Command::new(path);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let Ok(mut child) = ChildGuard::spawn_command(command) else {
        return "unknown".into();
    };
    let (Some(mut stdout), Some(mut stderr)) = (child.take_stdout(), child.take_stderr()) else {
        return "unknown".into();
    };
    let reading = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        let _ = stderr.read_to_string(&mut text);
        text
    });
    if !matches!(child.wait_for(Duration::from_secs(5)).await, Ok(Some(_))) {
        return "unknown".into();
    }
    let banner = reading.join().unwrap_or_default();
    version_in(&banner).unwrap_or_else(|| "unknown".into())
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
    let dir = tempfile::tempdir().context("creating a temporary directory for nginx")?;
    let port = lab_kit::net::closed_loopback_port()?;
    let config = dir.path().join("nginx.conf");
    std::fs::write(&config, nginx_config(dir.path(), port)).context("writing nginx.conf")?;
    let nginx = find("nginx").context("nginx")?;
    let prefix = dir.path().display().to_string();
    let config_arg = config.display().to_string();
    let _nginx = ChildGuard::spawn(&nginx, &["-c", &config_arg, "-p", &prefix], Stdio::null())?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut listening = false;
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            listening = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if !listening {
        bail!("nginx did not listen on {addr} within 2 s");
    }
    let mut command = Command::new(find("slowhttptest").context("slowhttptest")?);
    command
        .current_dir(dir.path())
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
    let probe_of = Probe {
        addr,
        host: addr.to_string(),
        options: doctor,
    };
    let finding = watch::slow_head(&probe_of).await?;
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
    let nginx_version = version_of("nginx", &["-v"]).await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_second_the_test_ended() {
        let report =
            "\u{1b}[0mWed Dec  2 2026:\u{1b}[0;36m\nTest ended on 6th second\nExit status:";
        assert_eq!(ended_second(report), Some(6));
        assert_eq!(ended_second("Test ended on 21st second"), Some(21));
        assert_eq!(ended_second("no such line"), None);
    }

    #[test]
    fn reads_a_version_from_each_banner() {
        assert_eq!(
            version_in("nginx version: nginx/1.22.1\n").as_deref(),
            Some("1.22.1")
        );
        assert_eq!(version_in("v20.20.2\n").as_deref(), Some("20.20.2"));
        assert_eq!(
            version_in("slowhttptest, a tool to test for slow HTTP DoS vulnerabilities - version 1.8.2\nUsage: slowhttptest [options ...]").as_deref(),
            Some("1.8.2")
        );
        assert_eq!(version_in("no number here, 12 or v.1"), None);
    }
}
