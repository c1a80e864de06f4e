//! The doctor as a reader runs it: the `doctor` binary against the lab's
//! two Rust services (started by the doctor, as a reader's command would
//! be), and against bad targets. Time is compressed 50x as in the lab.

use std::{
    io::{Read, Write},
    net::TcpListener,
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use lab_doctor::Config;
use lab_kit::{Lab, Mode};

const DOCTOR: &str = env!("CARGO_BIN_EXE_doctor");
pub(crate) const SERVICES: &str = env!("CARGO_BIN_EXE_lab-doctor");

pub(crate) struct Ran {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) took: Duration,
}

/// Runs the doctor, killed if it outlives `limit` (a hang fails the test).
pub(crate) fn doctor(args: &[String], limit: Duration) -> Ran {
    let started = Instant::now();
    let mut child = Command::new(DOCTOR)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the doctor starts");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = thread::spawn(move || {
        let mut text = String::new();
        out.read_to_string(&mut text).ok();
        text
    });
    let err = thread::spawn(move || {
        let mut text = String::new();
        err.read_to_string(&mut text).ok();
        text
    });
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        if started.elapsed() > limit {
            child.kill().ok();
            child.wait().ok();
            panic!("the doctor ran past {limit:?} with {args:?}");
        }
        thread::sleep(Duration::from_millis(20));
    };
    Ran {
        code,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        took: started.elapsed(),
    }
}

pub(crate) fn args(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| item.to_string()).collect()
}

/// The lab's arguments for one of its Rust services, as JSON: `checks`, or
/// every check where it is empty.
pub(crate) fn lab_args(service: &str, checks: &[&str]) -> Vec<String> {
    let config = Config::for_mode(Mode::Quick);
    let port = lab_kit::net::free_loopback_port().unwrap();
    let command = args(&[
        SERVICES,
        "serve",
        service,
        "--scale",
        &config.time_scale.to_string(),
        "--port",
        &port.to_string(),
    ]);
    let options = config.options(command.clone(), port, true);
    let mut line = args(&["--json", "--port", &port.to_string()]);
    for (flag, path) in lab_doctor::services::PATHS {
        line.extend(args(&[flag, path]));
    }
    let seconds = |duration: Duration| format!("{}ms", duration.as_millis());
    line.extend(args(&[
        "--balancer-idle",
        &seconds(options.balancer_idle),
        "--window",
        &seconds(options.window),
        "--grace",
        &seconds(options.grace),
    ]));
    line.extend(args(checks));
    line.push("--".into());
    line.extend(command);
    line
}

fn findings(ran: &Ran) -> Vec<(String, String, String)> {
    let report: serde_json::Value = serde_json::from_str(ran.stdout.trim())
        .unwrap_or_else(|error| panic!("not JSON ({error}): {}\n{}", ran.stdout, ran.stderr));
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|finding| {
            let text = |key: &str| finding[key].as_str().unwrap_or_default().to_string();
            (text("check"), text("grade"), text("measured"))
        })
        .collect()
}

// One test, so that the two services' loads do not overlap where it counts
// on a two-core machine: the stock service's blocked-runtime burst (8 reports
// of 300 ms of CPU on its 2 workers) would time the hardened service's
// canary. So that burst runs first, by itself; then the hardened service's
// nine checks (its canary first) run beside the stock service's other
// eight, whose loads are light: a ramp of callers on a pool of 4 slots held
// 100 ms each, and later the slow read. One after the other, the two runs
// took 18.7 s; this way about 12 s.
#[test]
fn the_hardened_service_passes_and_stock_axum_serve_is_reported() {
    let limit = Duration::from_secs(60);
    let burst = doctor(&lab_args("stock-axum", &["blocked-runtime"]), limit);
    let rest_of_stock = thread::spawn(move || {
        let others: Vec<&str> = lab_doctor::Check::HTTP1
            .iter()
            .map(|check| check.name())
            .filter(|name| *name != "blocked-runtime")
            .collect();
        doctor(&lab_args("stock-axum", &others), limit)
    });
    let hardened = doctor(&lab_args("hardened", &[]), limit);
    let stock = rest_of_stock.join().expect("the stock run's thread");
    let seen = findings(&hardened);
    assert_eq!(seen.len(), 9, "{seen:?}");
    for (check, grade, measured) in &seen {
        assert_eq!(
            grade, "pass",
            "hardened {check}: {measured}\n{}",
            hardened.stderr
        );
    }
    assert_eq!(hardened.code, 0);

    assert_eq!(burst.code, 1, "{}", burst.stderr);
    assert_eq!(stock.code, 1, "{}", stock.stderr);
    let seen = [findings(&burst), findings(&stock)].concat();
    assert_eq!(seen.len(), 9, "{seen:?}");
    let of = |name: &str| {
        seen.iter()
            .find(|(check, ..)| check == name)
            .cloned()
            .unwrap()
    };
    // What the server-timeouts chapter measured for axum::serve: the idle
    // connection and the half-sent head are both still open at the bound.
    let (_, grade, measured) = of("idle-keepalive");
    assert_eq!(
        (grade.as_str(), measured.as_str()),
        ("warn", "still open at 2.20 s")
    );
    let (_, grade, measured) = of("slow-head");
    assert_eq!(
        (grade.as_str(), measured.as_str()),
        ("fail", "still open at 2.20 s")
    );
    for failing in [
        "slow-body",
        "slow-read",
        "handler-deadline",
        "blocked-runtime",
        "overload",
        "shutdown",
    ] {
        let (_, grade, measured) = of(failing);
        assert_eq!(grade, "fail", "stock {failing}: {measured}");
    }
    assert_eq!(of("retry-after").1, "skip");
}

/// A listener that answers every connection with `reply` (or nothing) and
/// then holds it open.
fn peer(reply: &'static [u8]) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            stream.write_all(reply).ok();
            held.push(stream);
        }
    });
    port
}

/// Runs the doctor with `line`, its "CLOSED" (if any) replaced by a port
/// that refuses connections, and that no other test's server can be given,
/// while the doctor runs ([`lab_kit::net::ClosedPort`]).
fn run_on_a_closed_port(line: &[String], limit: Duration) -> Ran {
    let closed = lab_kit::net::closed_loopback_port().unwrap();
    let port = closed.port().to_string();
    let args: Vec<String> = line
        .iter()
        .map(|word| word.replace("CLOSED", &port))
        .collect();
    doctor(&args, limit)
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    // "CLOSED" stands for a port nothing listens on, held closed while its
    // case runs (see below).
    let closed = "CLOSED";
    let garbage = peer(b"SSH-2.0-OpenSSH_9.2\r\n").to_string();
    let silent = peer(b"").to_string();
    let cases: [(Vec<String>, &str, u64); 6] = [
        (
            args(&[&format!("127.0.0.1:{closed}")]),
            "nothing listens on",
            5,
        ),
        (
            args(&[&format!("127.0.0.1:{garbage}")]),
            "does not speak HTTP/1.x",
            5,
        ),
        (
            args(&[&format!("127.0.0.1:{silent}")]),
            "sent no HTTP response",
            10,
        ),
        (
            args(&["--port", closed, "--", "sleep", "30"]),
            "did not listen on",
            15,
        ),
        (
            args(&["127.0.0.1:1", "no-such-check"]),
            "unknown check \"no-such-check\"",
            5,
        ),
        (args(&["192.0.2.1:80"]), "not a loopback address", 5),
    ];
    let mut never_listened = String::new();
    for (line, says, within) in cases {
        let ran = run_on_a_closed_port(&line, Duration::from_secs(within + 5));
        assert_eq!(ran.code, 2, "{line:?}: {}", ran.stderr);
        let lines: Vec<&str> = ran.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{line:?}: {}", ran.stderr);
        assert!(lines[0].contains(says), "{line:?}: {}", lines[0]);
        assert!(
            lines[0].starts_with("error: doctor: "),
            "{line:?}: {}",
            lines[0]
        );
        if says == "did not listen on" {
            never_listened = lines[0].to_string();
        }
        assert!(
            ran.took < Duration::from_secs(within),
            "{line:?} took {:?}",
            ran.took
        );
    }
    // The command that never listened was killed, not left behind. The
    // error names its pid; SIGKILL is delivered, and the process reaped,
    // a moment after the doctor has exited, so allow that moment.
    let pid: i32 = never_listened
        .split("(pid ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {never_listened:?}"));
    let gone_by = Instant::now() + Duration::from_secs(5);
    while lab_kit::child::pid_exists(pid) && Instant::now() < gone_by {
        thread::sleep(Duration::from_millis(20));
    }
    assert!(!lab_kit::child::pid_exists(pid), "left running: pid {pid}");
}

#[test]
fn a_window_too_short_to_tell_a_header_timeout_from_none_is_a_warning() {
    let port = lab_kit::net::free_loopback_port().unwrap().to_string();
    let line = args(&[
        "--json",
        "--port",
        &port,
        "slow-head",
        "--balancer-idle",
        "1s",
        "--window",
        "1s",
        "--",
        SERVICES,
        "serve",
        "stock-axum",
        "--port",
        &port,
    ]);
    let ran = doctor(&line, Duration::from_secs(30));
    let seen = findings(&ran);
    assert_eq!(seen.len(), 1, "{seen:?}");
    let (_, grade, measured) = &seen[0];
    assert_eq!(
        (grade.as_str(), measured.as_str()),
        ("warn", "still open at 1.00 s")
    );
    assert_eq!(ran.code, 1);
}
