//! The probe, run as the user runs it (the lab's binary in a subprocess),
//! against the lab's own server and against commands that misbehave.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Output, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

use lab_kit::{Lab, Mode, net::free_loopback_port};
use lab_shutdown_drain::{Config, DeployCase, child::pid_exists, run_deploy};
use serde_json::Value;

const LAB: &str = env!("CARGO_BIN_EXE_lab-shutdown-drain");

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A port nothing listens on right now, for the server the probe starts.
fn free_port() -> u16 {
    free_loopback_port().expect("a free loopback port")
}

struct Probed {
    code: i32,
    report: Value,
    stderr: String,
}

fn probe(flags: &[&str], command: &[&str]) -> Probed {
    let _serial = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(LAB)
        .arg("probe")
        .args(flags)
        .arg("--")
        .args(command)
        .stdin(Stdio::null())
        .output()
        .expect("the probe runs");
    let stdout = String::from_utf8_lossy(&stdout);
    let report = serde_json::from_str(stdout.lines().last().unwrap_or("{}"))
        .unwrap_or_else(|error| panic!("the probe printed no JSON ({error}): {stdout}"));
    Probed {
        code: status.code().expect("the probe exited, not signalled"),
        report,
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// The pid the probe says it started.
fn started_pid(stderr: &str) -> i32 {
    stderr
        .lines()
        .find_map(|line| line.strip_prefix("probe: started pid "))
        .and_then(|rest| rest.split(':').next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no pid in the probe's stderr: {stderr}"))
}

fn own_server(style: &str, port: u16, db: &std::path::Path) -> Vec<String> {
    [
        LAB,
        "__server",
        "--style",
        style,
        "--port",
        &port.to_string(),
        "--db",
        &db.display().to_string(),
        "--drain-wait-ms",
        "400",
        "--slow-ms",
        "800",
        "--deadline-ms",
        "2000",
    ]
    .map(String::from)
    .to_vec()
}

/// The probe, with `flags` after `--port`, against the lab's own server in
/// `style`; whatever the verdict, the server is gone afterwards.
fn probe_own_server(style: &str, flags: &[&str]) -> Probed {
    let scratch = tempfile::tempdir().expect("a temp dir");
    let port = free_port();
    let command = own_server(style, port, &scratch.path().join("probe.db"));
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    let port_text = port.to_string();
    let probed = probe(&[&["--port", &port_text], flags].concat(), &command);
    let pid = probed.report["child_pid"].as_i64().expect("a pid") as i32;
    assert!(!pid_exists(pid), "pid {pid} is still there");
    probed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_agrees_with_the_lab_on_the_lab_s_own_server() {
    let mut config = Config::for_mode(Mode::Quick);
    config.server_exe = LAB.into();

    // The full sequence: clean for the lab, clean for the probe. Exit at
    // once: both see the signal and the cut in-flight requests.
    let full: &[(&str, Value)] = &[
        ("clean", true.into()),
        ("exit_code", 0.into()),
        ("in_flight_failed", 0.into()),
        ("readiness_before_refusing", true.into()),
    ];
    let naive: &[(&str, Value)] = &[
        ("exit_code", 143.into()),
        ("in_flight_completed", 0.into()),
        ("readiness_before_refusing", false.into()),
    ];
    for (style, case, code, report) in [
        ("full", DeployCase::Full, 0, full),
        ("exit-at-once", DeployCase::ExitAtOnce, 1, naive),
    ] {
        let probed = probe_own_server(style, &["--slow-path", "/slow", "--grace-ms", "3000"]);
        assert_eq!(probed.code, code, "{style}: {}", probed.stderr);
        for (field, expected) in report {
            assert_eq!(&probed.report[field], expected, "{style}: {field}");
        }
        let lab = run_deploy(case, &config).await.expect("the lab runs");
        assert_eq!(
            lab.summary.exit_code,
            probed.report["exit_code"].as_i64().unwrap(),
            "{style}"
        );
        // Every request in flight at SIGTERM completes, or (exit at once) none.
        let in_flight_completed = match case {
            DeployCase::ExitAtOnce => 0,
            _ => lab.summary.in_flight_at_sigterm,
        };
        assert_eq!(
            lab.summary.in_flight_completed, in_flight_completed,
            "{style}"
        );
    }
}

#[test]
fn bad_arguments_get_one_error_line_and_exit_2() {
    for (flags, expected) in [
        (
            &["--port", "80", "--bogus", "1"][..],
            "unknown probe flag \"--bogus\"",
        ),
        (
            &["--port", "abc"][..],
            "--port \"abc\" is not a whole number",
        ),
        (&["--in-flight"][..], "--in-flight needs a value"),
    ] {
        let probed = probe(flags, &["true"]);
        assert_eq!(probed.code, 2, "{flags:?}: {}", probed.stderr);
        let lines: Vec<&str> = probed.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{flags:?}: {}", probed.stderr);
        assert!(
            lines[0].starts_with("error: lab-shutdown-drain probe: ")
                && lines[0].contains(expected),
            "{flags:?}: {}",
            lines[0]
        );
    }
}

/// The probe, with `flags` after `--port` on a free port, on a `command` it
/// cannot probe: it exits 2, and its report's error comes back with the rest.
fn probe_refused(flags: &[&str], command: &[&str]) -> (String, Probed) {
    let port = free_port().to_string();
    let probed = probe(&[&["--port", &port], flags].concat(), command);
    assert_eq!(probed.code, 2, "{}", probed.stderr);
    let error = probed.report["error"].as_str().expect("an error field");
    (error.to_string(), probed)
}

#[test]
fn a_command_that_does_not_start_gets_a_clear_error() {
    let (error, probed) = probe_refused(&[], &["/nonexistent/no-such-server"]);
    assert!(
        error.contains("no-such-server") && error.contains("No such file"),
        "{error}"
    );
    assert!(probed.stderr.starts_with("error: "), "{}", probed.stderr);
}

#[test]
fn a_command_that_exits_before_listening_is_reported() {
    let (error, probed) = probe_refused(&[], &["false"]);
    assert!(error.contains("exited (1) before it listened"), "{error}");
    assert!(!pid_exists(started_pid(&probed.stderr)));
}

#[test]
fn a_command_that_never_listens_is_killed() {
    let started = Instant::now();
    let (error, probed) = probe_refused(&["--start-timeout-ms", "500"], &["sleep", "30"]);
    assert!(
        error.contains("did not listen") && error.contains("killed it"),
        "{error}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the probe hung"
    );
    let pid = started_pid(&probed.stderr);
    assert!(!pid_exists(pid), "sleep (pid {pid}) is still running");
}

#[test]
fn a_server_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let probed = probe_own_server("ignore-sigterm", &["--grace-ms", "1000"]);
    assert_eq!(probed.code, 1, "{}", probed.stderr);
    assert_eq!(probed.report["killed_after_grace"], true);
    assert_eq!(probed.report["exit_code"], 137);
    assert!(
        probed.report["verdict"]
            .as_str()
            .is_some_and(|verdict| verdict.contains("did not exit within"))
    );
}

#[test]
fn a_probe_that_is_killed_leaves_no_orphan() {
    let _serial = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let port = free_port().to_string();
    let mut probe = Command::new(LAB)
        .args([
            "probe",
            "--port",
            &port,
            "--start-timeout-ms",
            "20000",
            "--",
            "sleep",
            "30",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the probe starts");
    let stderr = probe.stderr.take().expect("piped stderr");
    let mut first_line = String::new();
    BufReader::new(stderr)
        .read_line(&mut first_line)
        .expect("the probe says what it started");
    let pid = started_pid(&first_line);
    assert!(pid_exists(pid));
    // SIGKILL: no destructor runs in the probe; the kernel's parent-death
    // signal is what must take the child down.
    probe.kill().expect("SIGKILL to the probe");
    probe.wait().expect("reaped");
    let deadline = Instant::now() + Duration::from_secs(5);
    while pid_exists(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!pid_exists(pid), "the probe's child {pid} outlived it");
}
