//! Servers in the wild (`wild::run`): every server this machine has starts
//! from the lab's own command and is measured, and a machine without them
//! gets a row per server that says so, beside the hardened service's
//! measured row. A short window: these tests check that each server ran,
//! not its defaults (the reference runs show those).

use serde_json::Value;

use lab_doctor::wild;

/// The lab's binary, whose `serve hardened` is the hardened service.
fn lab() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_lab-doctor"))
}

/// The rows of one run as JSON, by series (`wild/nginx`).
fn rows(ran: Vec<(String, impl serde::Serialize)>) -> Vec<(String, Value)> {
    ran.into_iter()
        .map(|(series, row)| (series, serde_json::to_value(row).unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_machine_without_the_servers_gets_a_row_per_server_that_says_so() {
    // One "caddy" is installed, and it fails as it starts, saying why on
    // stderr: its row says that too.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("caddy");
    std::fs::write(
        &broken,
        "#!/bin/sh\necho 'loading config: no such thing' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&broken, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let locate = |name: &str| (name == "caddy").then(|| broken.clone());
    let started = std::time::Instant::now();
    let ran = wild::run_finding(1.0, 2.0, locate, lab()).await.unwrap();
    let rows = rows(ran);
    assert_eq!(rows.len(), 10, "{rows:?}");
    let (series, caddy) = &rows[4];
    assert_eq!(series, "wild/caddy");
    let cell = caddy["idle_keepalive"].as_str().unwrap();
    assert!(
        cell.starts_with("not run: the command exited (1) before it listened")
            && cell.ends_with("; it said: loading config: no such thing"),
        "{cell}"
    );
    for (series, row) in rows[..9]
        .iter()
        .filter(|(series, _)| series != "wild/caddy")
    {
        let cell = row["shutdown"].as_str().unwrap();
        assert!(
            cell.starts_with("not run: ") && cell.ends_with(" is not installed"),
            "{series}: {row}"
        );
        assert_eq!(row["died_of_sigterm"], -1.0, "{series}: {row}");
    }
    assert!(
        rows[3].1["idle_keepalive"]
            .as_str()
            .unwrap()
            .contains("apache2 or httpd is not installed"),
        "{:?}",
        rows[3]
    );
    // The hardened service is the lab's own binary: it always runs, and in
    // a 1 s window its 90 s timeouts are still to come.
    let (series, hardened) = &rows[9];
    assert_eq!(series, "wild/hardened");
    assert_eq!(
        hardened["idle_keepalive"], "warn: still open at 1.00 s",
        "{hardened}"
    );
    assert_eq!(hardened["died_of_sigterm"], 0.0, "{hardened}");
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread")]
async fn every_installed_server_starts_from_the_labs_command_and_is_measured() {
    let rows = rows(
        wild::run_finding(2.0, 3.0, lab_kit::nginx::find, lab())
            .await
            .unwrap(),
    );
    let mut measured = Vec::new();
    for (series, row) in &rows {
        let shutdown = row["shutdown"].as_str().unwrap();
        if shutdown.ends_with(" is not installed") {
            eprintln!("{series}: skipped, {shutdown}");
            continue;
        }
        // It ran: its shutdown was measured (an exit, on its own or by the
        // signal), its version was read, and no check failed to start.
        assert!(
            row["died_of_sigterm"] == 0.0 || row["died_of_sigterm"] == 1.0,
            "{series}: {row}"
        );
        let server = row["server"].as_str().unwrap();
        assert!(!server.ends_with("unknown"), "{series}: {row}");
        for check in ["idle_keepalive", "slow_head", "slow_body", "slow_read"] {
            let cell = row[check].as_str().unwrap();
            assert!(!cell.starts_with("not run: "), "{series} {check}: {cell}");
        }
        measured.push(series.clone());
    }
    eprintln!("measured: {measured:?}");
    assert!(
        measured.contains(&"wild/hardened".to_string()),
        "{measured:?}"
    );
}
