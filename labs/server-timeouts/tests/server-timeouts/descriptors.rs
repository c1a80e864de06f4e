//! The descriptor part: a server process with 64 open files allowed, filled
//! by slow clients, then a probe. `axum::serve` leaves the probe waiting
//! until the slow clients go and accepts it at its next once-a-second retry;
//! the hardened server cuts the slow clients at its header read timeout and
//! serves the probe while they still hold on. Neither spins the CPU or
//! writes a line.

use lab_kit::{Lab, Mode};
use lab_server_timeouts::{
    Config,
    descriptors::{DescriptorExhaustion, descriptors},
    fd_server::{FdServer, FdServerArgs},
    servers::Hardening,
};

fn config() -> Config {
    let mut config = Config::for_mode(Mode::Quick);
    config.fd_server_exe = env!("CARGO_BIN_EXE_lab-server-timeouts").into();
    config
}

#[test]
fn the_server_arguments_survive_the_command_line() {
    let args = FdServerArgs {
        server: FdServer::Hardened,
        open_files: 64,
        hardening: Hardening {
            header_read_timeout: std::time::Duration::from_millis(1800),
            request_body_timeout: std::time::Duration::from_millis(200),
            handler_deadline: std::time::Duration::from_millis(300),
        },
    };
    let line = args.to_args();
    assert_eq!(FdServerArgs::parse(&line[1..]).expect("parses"), args);
    let error =
        FdServerArgs::parse(&["--open-files".into(), "3".into()]).expect_err("3 files is refused");
    assert!(!format!("{error:#}").contains('\n'), "{error:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axum_serve_waits_for_the_slow_clients_and_the_hardened_server_cuts_them() {
    let config = config();
    let hold_ms = config.lab(config.descriptor_hold_s).as_secs_f64() * 1000.0;
    let header_ms = config.lab(config.hardened_header_read_s).as_secs_f64() * 1000.0;
    let (limits, rows) = descriptors(&config)
        .await
        .expect("the descriptor part runs");
    assert!(limits.soft_limit <= limits.hard_limit, "{limits:?}");
    let row = |server: FdServer| -> &DescriptorExhaustion {
        &rows
            .iter()
            .find(|(which, _)| *which == server)
            .expect("a row per server")
            .1
    };
    for server in FdServer::ALL {
        let row = row(server);
        // The server lowered its own limit, and the slow clients took every
        // slot it had left.
        assert_eq!(row.limit, config.descriptor_limit, "{row:?}");
        assert!(row.became_full, "{row:?}");
        assert_eq!(row.slow_clients + row.baseline_fds, row.limit, "{row:?}");
        assert!(row.slow_clients >= 32, "{row:?}");
        // Nothing in the server's logs, and no spinning: a loop that retried
        // accept without a pause would burn the whole hold on the CPU.
        assert_eq!(row.stderr_bytes, 0, "{row:?}");
        assert!(row.cpu_ms_while_full < hold_ms / 2.0, "{row:?}");
    }
    let axum = row(FdServer::AxumServe);
    assert!(!axum.answered_while_held, "{axum:?}");
    assert!(
        axum.probe_verdict.starts_with("answered 200 after"),
        "{axum:?}"
    );
    assert_eq!(axum.slow_closed_by_server, 0, "{axum:?}");
    // After the release, its next retry: within a second (and a margin),
    // and on the once-a-second beat counted from when accept first failed.
    // That is about when the probe was sent, a moment after it or (when a
    // connection of the fill loop's found the table full first) a moment
    // before: one run waited 2999.85 ms. So the wait is within 300 ms of a
    // whole number of seconds, on either side.
    assert!(axum.after_release_ms <= 1300.0, "{axum:?}");
    let past_whole_second = axum.probe_wait_ms % 1000.0;
    let off_the_beat = past_whole_second.min(1000.0 - past_whole_second);
    assert!(off_the_beat < 300.0, "{axum:?}");
    assert!(axum.cpu_ms_while_full < hold_ms / 10.0, "{axum:?}");

    let hardened = row(FdServer::Hardened);
    assert!(hardened.answered_while_held, "{hardened:?}");
    assert_eq!(hardened.after_release_ms, 0.0, "{hardened:?}");
    assert_eq!(
        hardened.slow_closed_by_server, hardened.slow_clients,
        "{hardened:?}"
    );
    // It waited for the first slow client's header read timeout to free a slot.
    let first_cut_after_probe = header_ms - hardened.full_after_ms;
    assert!(
        hardened.probe_wait_ms >= first_cut_after_probe * 0.8,
        "{hardened:?}"
    );
}
