//! PID 1 and signals: the server started each way, SIGTERM to what a runtime
//! signals. Where the kernel refuses a PID namespace, the lab skips those
//! starts, and the test asserts that it did.

use lab_kit::{Lab, Mode, Series};
use lab_shutdown_drain::{
    Config,
    pid_one::{PidOneSummary, Start, namespaces_allowed, pid_one},
};

use crate::deploys::ONE_AT_A_TIME;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_reaches_the_server_only_when_it_is_pid_1_with_a_handler_or_behind_an_init() {
    let mut config = Config::for_mode(Mode::Quick);
    config.server_exe = env!("CARGO_BIN_EXE_lab-shutdown-drain").into();
    let _serial = ONE_AT_A_TIME.lock().await;
    let allowed = namespaces_allowed(&config).await.expect("the helper runs");
    let results = pid_one(&config).await.expect("the starts run");
    let find = |start: Start| -> &PidOneSummary {
        lab_kit::concurrently::result_of(&results, &start)
            .unwrap_or_else(|| panic!("no result for {}", start.series()))
    };
    let grace = config.termination_grace_ms as f64;

    // (got SIGTERM, exit code, killed at the grace deadline)
    let ends_so = |start: Start, got: bool, exit: i64, killed: bool| {
        let summary = find(start);
        assert_eq!(
            (
                summary.server_got_sigterm,
                summary.exit_code,
                summary.killed_at_grace
            ),
            (got, exit, killed),
            "{}: {summary:#?}",
            start.series()
        );
        let in_time = if killed {
            summary.time_to_exit_ms >= grace
        } else {
            summary.time_to_exit_ms < grace
        };
        assert!(in_time, "{}: {summary:#?}", start.series());
        summary
    };

    // Ordinary processes: no handler dies at once; a shell in front dies at
    // once too, and leaves the server running, never told.
    ends_so(Start::PlainNoHandler, true, 143, false);
    let shell = ends_so(Start::PlainShell, false, 143, false);
    assert!(shell.left_running, "{shell:#?}");

    if !allowed {
        assert_eq!(results.len(), 2, "only the ordinary starts ran");
        return;
    }
    assert_eq!(results.len(), Start::ALL.len());
    // PID 1 without a handler: SIGTERM is dropped, SIGKILL at the deadline.
    let pid_one = ends_so(Start::NoHandler, false, 137, true);
    assert_eq!(pid_one.server_pid_inside, 1.0);
    // PID 1 with a handler: it drains and exits 0.
    let handler = ends_so(Start::Handler, true, 0, false);
    assert!(
        handler.drained && handler.server_pid_inside == 1.0,
        "{handler:#?}"
    );
    // `sh -c "server"`: the shell is PID 1, the server never hears of it.
    let shell = ends_so(Start::Shell, false, 137, true);
    assert!(shell.server_pid_inside > 1.0, "{shell:#?}");
    // `sh -c "exec server"`: the server is PID 1.
    let exec = ends_so(Start::ShellExec, true, 0, false);
    assert_eq!(exec.server_pid_inside, 1.0);
    // The init forwards: a server without a handler dies of SIGTERM as an
    // ordinary process would; one with a handler drains.
    let forwarded = ends_so(Start::InitNoHandler, true, 143, false);
    assert!(forwarded.server_pid_inside > 1.0, "{forwarded:#?}");
    let drained = ends_so(Start::InitHandler, true, 0, false);
    assert!(drained.drained, "{drained:#?}");
    for (start, summary) in &results {
        if start.in_namespace() {
            assert!(!summary.left_running, "{}: {summary:#?}", start.series());
        }
    }
}
