//! nginx with TLS and HTTP/2 on one loopback port, a certificate made at
//! test time, `keepalive_timeout 2s` and `client_header_timeout 3s`: over
//! TLS the doctor reads the idle close and the slow head within 10 % of 2 s
//! and 3 s, its HTTP/2 checks report what nginx does, plain HTTP to the
//! port is named, and the shutdown check runs over TLS with the doctor
//! starting nginx itself. Skipped with one line where nginx is not
//! installed.

use std::{path::Path, time::Duration};

use serde_json::Value;

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

#[test]
fn nginx_over_tls_and_http2_as_the_doctor_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(false);
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, pem("CERTIFICATE", &pki.cert)).unwrap();
    std::fs::write(&key, pem("PRIVATE KEY", &pki.key)).unwrap();
    let ca = pki.ca_file(&dir);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let started = runtime.block_on(lab_kit::nginx::Nginx::start(1, |addrs| {
        let listen = format!("{} ssl http2", addrs[0]);
        format!(
            "keepalive_timeout 2s;\nclient_header_timeout 3s;\n{}",
            server_block(&listen, &cert, &key)
        )
    }));
    let nginx = match started {
        Ok(nginx) => nginx,
        Err(error) if lab_kit::nginx::find("nginx").is_none() => {
            eprintln!("skipped: {error:#}");
            return;
        }
        Err(error) => panic!("{error:#}"),
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
        "h2-slow-head",
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
    // A header block that never ends is held past client_header_timeout;
    // the stream limit is advertised (without a slow route the doctor does
    // not go past it).
    assert_eq!(
        finding(&report, "h2-slow-head")["measured"],
        "still open at 5.00 s"
    );
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
