//! nginx with TLS and HTTP/2 on one loopback port, a certificate made at
//! test time, `keepalive_timeout 2s` and `client_header_timeout 3s`: over
//! TLS the doctor reads the idle close and the slow head within 10 % of 2 s
//! and 3 s, its HTTP/2 checks report what nginx does, plain HTTP to the
//! port is named, and the shutdown check runs over TLS with the doctor
//! starting nginx itself. Skipped with one line where nginx is not
//! installed.

use std::{path::Path, time::Duration};

use serde_json::Value;

use lab_kit::nginx::Nginx;

use crate::{
    doctor::{args, doctor},
    tls::{Pki, one_line, pem},
};

/// The doctor's `--json` report for `words`.
fn report(words: &[&str], limit: Duration) -> Value {
    let ran = doctor(&args(words), limit);
    serde_json::from_str(&ran.stdout).unwrap_or_else(|_| panic!("{}{}", ran.stdout, ran.stderr))
}

fn finding(report: &Value, check: &str) -> Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|finding| finding["check"] == check)
        .unwrap_or_else(|| panic!("{check} in {report}"))
        .clone()
}

/// An nginx `server` block on `listen` with the test's certificate.
fn server_block(listen: &str, cert: &Path, key: &Path) -> String {
    format!(
        "server {{\n  listen {listen};\n  ssl_certificate {};\n  ssl_certificate_key {};\n  \
         location / {{ return 200 \"ok\\n\"; }}\n}}\n",
        cert.display(),
        key.display()
    )
}

/// nginx on a loopback port of its own with TLS and HTTP/2, these two
/// timeouts, and the test's certificate; `None`, after one line, where
/// nginx is not installed.
fn nginx_with(keepalive_s: u32, header_s: u32, cert: &Path, key: &Path) -> Option<Nginx> {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let started = runtime.block_on(Nginx::start(1, |addrs| {
        let listen = format!("{} ssl http2", addrs[0]);
        format!(
            "keepalive_timeout {keepalive_s}s;\nclient_header_timeout {header_s}s;\n{}",
            server_block(&listen, cert, key)
        )
    }));
    match started {
        Ok(nginx) => Some(nginx),
        Err(error) if lab_kit::nginx::find("nginx").is_none() => {
            eprintln!("skipped: {error:#}");
            None
        }
        Err(error) => panic!("{error:#}"),
    }
}

/// The test's certificate and key as PEM files in `dir`, and the file of
/// the authority that signed them.
fn certificate_files(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, String) {
    let pki = Pki::new(false);
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, pem("CERTIFICATE", &pki.cert)).unwrap();
    std::fs::write(&key, pem("PRIVATE KEY", &pki.key)).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, pki.ca_pem()).unwrap();
    (cert, key, ca.display().to_string())
}

/// An HTTP/2 header block that never ends: nginx 1.22 ends the connection
/// with GOAWAY PROTOCOL_ERROR after its keepalive_timeout plus its
/// client_header_timeout, three pairs of them measured at once.
#[test]
fn nginx_ends_an_unfinished_http2_header_block_after_both_timeouts() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, ca) = certificate_files(dir.path());
    let mut runs = Vec::new();
    for (keepalive_s, header_s) in [(2, 3), (2, 4), (5, 3)] {
        let Some(nginx) = nginx_with(keepalive_s, header_s, &cert, &key) else {
            return;
        };
        let (ca, sum) = (ca.clone(), f64::from(keepalive_s + header_s));
        runs.push(std::thread::spawn(move || {
            let target = format!("https://localhost:{}", nginx.addrs()[0].port());
            let words = [
                &target,
                "--ca",
                &ca,
                "--window",
                "10s",
                "--json",
                "h2-slow-head",
            ];
            let seen = finding(&report(&words, Duration::from_secs(30)), "h2-slow-head");
            drop(nginx);
            (keepalive_s, header_s, sum, seen)
        }));
    }
    for run in runs {
        let (keepalive_s, header_s, sum, seen) = run.join().unwrap();
        let value = seen["value"].as_f64().unwrap_or_default();
        assert!(
            (value - sum).abs() <= sum * 0.1,
            "keepalive_timeout {keepalive_s}s, client_header_timeout {header_s}s: {seen}"
        );
        let measured = seen["measured"].as_str().unwrap();
        assert!(
            measured.starts_with("GOAWAY PROTOCOL_ERROR (last stream 1)"),
            "{seen}"
        );
    }
}

#[test]
fn nginx_over_tls_and_http2_as_the_doctor_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, ca) = certificate_files(dir.path());
    let Some(nginx) = nginx_with(2, 3, &cert, &key) else {
        return;
    };
    let port = nginx.addrs()[0].port();
    let target = format!("https://localhost:{port}");
    http1_over_tls(&target, &ca);
    http2_over_tls(&target, &ca);
    // Plain HTTP to that port: nginx answers 400, and the doctor names it.
    let plain = format!("127.0.0.1:{port}");
    let line = one_line(
        &[&plain, "idle-keepalive"],
        "speaks TLS",
        Duration::from_secs(10),
    );
    assert!(
        line.ends_with("(it answered 400: plain HTTP sent to an HTTPS port)"),
        "{line}"
    );
    drop(nginx);
    shutdown_over_tls(dir.path(), &cert, &key, &ca);
}

fn http1_over_tls(target: &str, ca: &str) {
    let words = [
        target,
        "--ca",
        ca,
        "--window",
        "5s",
        "--json",
        "idle-keepalive",
        "slow-head",
    ];
    let report = report(&words, Duration::from_secs(30));
    assert!(
        report["transport"].as_str().unwrap().starts_with("TLS 1."),
        "{report}"
    );
    for (check, seconds) in [("idle-keepalive", 2.0), ("slow-head", 3.0)] {
        let finding = finding(&report, check);
        let value = finding["value"].as_f64().unwrap_or_default();
        assert!(
            (value - seconds).abs() <= seconds * 0.1,
            "{check}: {value} s against nginx's {seconds} s: {finding}"
        );
    }
}

/// The HTTP/2 checks on the same port, ALPN h2.
fn http2_over_tls(target: &str, ca: &str) {
    let words = [
        target,
        "--ca",
        ca,
        "--window",
        "5s",
        "--json",
        "h2-idle",
        "h2-streams",
    ];
    let report = report(&words, Duration::from_secs(30));
    assert!(
        report["transport"].as_str().unwrap().contains("ALPN h2"),
        "{report}"
    );
    // nginx ends an idle HTTP/2 connection at its keepalive_timeout too,
    // with a GOAWAY.
    let idle = finding(&report, "h2-idle");
    let value = idle["value"].as_f64().unwrap_or_default();
    assert!((value - 2.0).abs() <= 0.2, "{idle}");
    assert!(
        idle["measured"]
            .as_str()
            .unwrap()
            .starts_with("GOAWAY NO_ERROR"),
        "{idle}"
    );
    // The stream limit is advertised (without a slow route the doctor does
    // not go past it).
    let why = finding(&report, "h2-streams")["why"].clone();
    assert!(
        why.as_str()
            .unwrap()
            .starts_with("SETTINGS_MAX_CONCURRENT_STREAMS "),
        "{why}"
    );
}

/// The shutdown check over TLS, the doctor starting nginx itself: nginx
/// takes SIGTERM as its fast shutdown and exits.
fn shutdown_over_tls(dir: &Path, cert: &Path, key: &Path, ca: &str) {
    let port = lab_kit::net::free_loopback_port().unwrap();
    let block = server_block(&format!("127.0.0.1:{port} ssl"), cert, key);
    let config = dir.join("nginx.conf");
    std::fs::write(&config, lab_kit::nginx::nginx_config(dir, &block)).unwrap();
    let nginx = lab_kit::nginx::find("nginx").unwrap().display().to_string();
    let (port, config, prefix) = (
        port.to_string(),
        config.display().to_string(),
        dir.display().to_string(),
    );
    let words = [
        "--tls", "--ca", ca, "--port", &port, "--grace", "5s", "--json", "shutdown", "--", &nginx,
        "-c", &config, "-p", &prefix,
    ];
    let report = report(&words, Duration::from_secs(40));
    let shutdown = finding(&report, "shutdown");
    assert!(
        shutdown["measured"].as_str().unwrap().starts_with("exit "),
        "{shutdown}"
    );
}
