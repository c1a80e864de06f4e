//! What `axum::serve` does when `accept` fails: read in axum's source at the
//! pinned version, `serve/listener.rs`: `impl Listener for TcpListener`
//! loops on `accept`, and `handle_accept_error` returns at once for a
//! refused, aborted or reset connection and otherwise (EMFILE, out of file
//! descriptors, among them) logs `accept error` through axum's `error!`
//! macro, which is `tracing::error!` only with axum's `tracing` feature and
//! nothing without it, then sleeps one second before the loop tries again.
//!
//! Shown here with a real EMFILE: the test binary runs again as a server
//! whose soft limit on open files is low (the limit is per process, so the
//! test's own clients must live in another one), the test fills every slot
//! with idle connections, sends a request (accept fails: the request waits
//! in the kernel's queue), frees a slot at once, and times the answer.

use std::{
    io::BufRead,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use axum::{Router, routing::get};
use lab_facts::{RawPeer, bounded};
use lab_kit::child::ChildGuard;

/// Set in the environment of the re-executed test binary, which then plays
/// the server.
const SERVER_ROLE: &str = "LAB_FACTS_EMFILE_SERVER";
const MARK: &str = "emfile-server-port=";
/// The server's soft limit on open files.
const LIMIT: u64 = 32;

fn app() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

/// In the facts run: `axum::serve` on this process's own limit answers at
/// once. As the server of the test below: lowers its limit, prints its port,
/// and serves until killed (bounded, so a broken test leaves nothing).
#[test]
fn serve_answers_and_plays_the_emfile_server() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let serving = std::env::var_os(SERVER_ROLE).is_some();
    if serving {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit and setrlimit read or write one rlimit of ours.
        unsafe {
            assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
            limit.rlim_cur = LIMIT;
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        }
    }
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding");
        let addr = listener.local_addr().expect("the bound address");
        let server = tokio::spawn(async move { axum::serve(listener, app()).await });
        if serving {
            // On a line of its own: the harness has just printed "test ... ".
            println!("\n{MARK}{}", addr.port());
            tokio::time::sleep(Duration::from_secs(30)).await;
        } else {
            let mut peer = RawPeer::connect(addr).await;
            peer.send(b"GET / HTTP/1.1\r\nHost: facts\r\n\r\n").await;
            bounded(
                "an answer",
                Duration::from_secs(5),
                peer.read_until("hello"),
            )
            .await;
        }
        server.abort();
    });
}

/// The descriptors of process `pid` numbered below the limit: the slots
/// `accept` can use.
fn slots_taken(pid: i32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("reading the server's descriptors")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .filter(|fd| *fd < LIMIT)
        .count() as u64
}

#[tokio::test]
async fn serve_sleeps_a_second_after_emfile_then_accepts_again() {
    bounded(
        "axum::serve out of descriptors",
        Duration::from_secs(30),
        async {
            let exe = std::env::current_exe().expect("the test binary's path");
            let mut command = Command::new(exe);
            command
                .args([
                    "--exact",
                    "axum_accept::serve_answers_and_plays_the_emfile_server",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(SERVER_ROLE, "1")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null());
            let mut server =
                ChildGuard::spawn_command(command).expect("the test binary runs again");
            let pid = server.pid();
            let stdout = std::io::BufReader::new(server.take_stdout().expect("piped stdout"));
            let port: u16 = tokio::task::spawn_blocking(move || {
                stdout.lines().map_while(Result::ok).find_map(|line| {
                    line.split_once(MARK)
                        .map(|(_, port)| port.trim().to_string())
                })
            })
            .await
            .expect("reading the server's port")
            .expect("the server printed its port")
            .parse()
            .expect("a port");
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            // Idle connections until every slot is taken.
            let mut idle = Vec::new();
            while slots_taken(pid) < LIMIT {
                assert!(idle.len() < LIMIT as usize, "the slots never filled");
                let before = slots_taken(pid);
                idle.push(RawPeer::connect(addr).await);
                let accepted_by = Instant::now() + Duration::from_secs(2);
                while slots_taken(pid) == before && Instant::now() < accepted_by {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            // The request: the handshake completes in the kernel, accept fails.
            let mut probe = RawPeer::connect(addr).await;
            let sent = Instant::now();
            probe.send(b"GET / HTTP/1.1\r\nHost: facts\r\n\r\n").await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            // A slot frees at once: the server reads end of stream on it.
            drop(idle.pop());
            bounded(
                "the answer after EMFILE",
                Duration::from_secs(5),
                probe.read_until("hello"),
            )
            .await;
            let waited = sent.elapsed();
            // Not at once (a slot was free 100 ms in), but at the retry one
            // second after the failed accept; margins for a busy machine.
            assert!(
                waited >= Duration::from_millis(900),
                "answered after {waited:?}: no pause after the failed accept"
            );
            assert!(
                waited <= Duration::from_millis(2500),
                "answered after {waited:?}: more than one retry"
            );
            drop(server);
        },
    )
    .await;
}
