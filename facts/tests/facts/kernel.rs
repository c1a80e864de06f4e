//! The Linux kernel's TCP settings the book quotes, read from this machine
//! (the values the pages state are the stock ones; a machine tuned otherwise
//! fails here, by name) and, where a number is compiled in, observed on a
//! real socket.

use std::{os::fd::AsRawFd, time::Duration};

use lab_facts::bounded;
use lab_kit::{
    net::bind_loopback,
    procnet::{self, TcpState},
};
use tokio::{io::AsyncReadExt, net::TcpSocket};

fn sysctl(path: &str) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("reading {path}: {error}"))
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn the_ephemeral_port_range_is_32768_to_60999() {
    let range = sysctl("/proc/sys/net/ipv4/ip_local_port_range");
    assert_eq!(range, "32768 60999");
    assert_eq!(60999 - 32768 + 1, 28_232);
}

#[test]
fn tcp_keepalive_defaults_are_7200_75_9() {
    let read = [
        "tcp_keepalive_time",
        "tcp_keepalive_intvl",
        "tcp_keepalive_probes",
    ]
    .map(|name| sysctl(&format!("/proc/sys/net/ipv4/{name}")));
    assert_eq!(read, ["7200", "75", "9"]);
}

#[tokio::test]
async fn somaxconn_caps_the_listen_backlog() {
    let somaxconn: u32 = sysctl("/proc/sys/net/core/somaxconn")
        .parse()
        .expect("a number");
    let socket = TcpSocket::new_v4().expect("a socket");
    socket
        .bind((std::net::Ipv4Addr::LOCALHOST, 0).into())
        .expect("binding");
    let asked = 65_535;
    let listener = socket.listen(asked).expect("listening");
    // For a listener, TCP_INFO's `tcpi_sacked` is the accept queue's limit.
    let info = lab_kit::procnet::tcp_info(listener.as_raw_fd()).expect("TCP_INFO on the listener");
    assert!(somaxconn < asked, "somaxconn {somaxconn} is no cap here");
    assert_eq!(info.tcpi_sacked, somaxconn, "the backlog asked was {asked}");
}

#[tokio::test]
async fn time_wait_lasts_60_s_on_the_side_that_closed_first() {
    bounded("TIME_WAIT", Duration::from_secs(10), async {
        let listener = bind_loopback().await.expect("binding");
        let addr = listener.local_addr().expect("address");
        let client = tokio::net::TcpStream::connect(addr)
            .await
            .expect("connecting");
        let client_port = client.local_addr().expect("address").port();
        let (mut served, _) = listener.accept().await.expect("accepting");
        // The client closes first; the server reads the end and closes too.
        drop(client);
        let mut buffer = [0u8; 16];
        assert_eq!(served.read(&mut buffer).await.expect("reading the end"), 0);
        drop(served);
        tokio::time::sleep(Duration::from_millis(100)).await;
        // The row is ours by both ports: another process's connection to
        // another server may have used the same local port seconds ago and
        // still be in TIME_WAIT (seen once, with 39 s left, among the tests
        // that run side by side).
        let row = procnet::tcp_sockets()
            .expect("reading the socket tables")
            .into_iter()
            .find(|row| {
                row.local_port == client_port
                    && row.remote_port == addr.port()
                    && row.state == TcpState::TimeWait as u8
            })
            .expect("the client's socket in TIME_WAIT");
        // The `when` of `tr:tm->when` counts down in clock ticks (USER_HZ).
        let ticks = row.timer_ticks;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        let seconds = ticks as f64 / hz as f64;
        // Timer kind 3: TIME_WAIT's.
        assert_eq!(row.timer_kind, 3, "{row:?}");
        assert!(
            (55.0..=60.0).contains(&seconds),
            "{seconds} s left: {row:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn closing_with_unread_data_sends_a_reset_not_a_fin() {
    bounded("RST on close", Duration::from_secs(10), async {
        use tokio::io::AsyncWriteExt;
        let listener = bind_loopback().await.expect("binding");
        let addr = listener.local_addr().expect("address");
        // Two connections: one whose peer reads what it was sent before it
        // closes, one whose peer closes with the bytes still unread.
        let mut ends = Vec::new();
        for read_first in [true, false] {
            let mut client = tokio::net::TcpStream::connect(addr)
                .await
                .expect("connecting");
            let (mut served, _) = listener.accept().await.expect("accepting");
            client
                .write_all(b"GET / HTTP/1.1\r\n\r\n")
                .await
                .expect("writing");
            // Wait until the bytes sit in the served socket's receive buffer.
            let mut peek = [0u8; 64];
            let waiting = served.peek(&mut peek).await.expect("peeking");
            assert!(waiting > 0);
            if read_first {
                let mut buffer = vec![0u8; waiting];
                served.read_exact(&mut buffer).await.expect("reading");
            }
            drop(served);
            let mut buffer = [0u8; 16];
            ends.push(match client.read(&mut buffer).await {
                Ok(0) => "fin".to_string(),
                Ok(n) => format!("{n} bytes"),
                Err(error) => format!("{:?}", error.kind()),
            });
        }
        assert_eq!(ends, ["fin", "ConnectionReset"]);
    })
    .await;
}

#[test]
fn a_child_keeps_the_signals_its_parent_blocked_across_spawn_and_exec() {
    // In a thread of its own: the mask is per thread, and the child is
    // forked from the thread that spawns it.
    let blocked = std::thread::spawn(|| {
        // SAFETY: an all-zero sigset_t is valid storage for sigemptyset to
        // initialise; pthread_sigmask changes this thread's mask only.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            assert_eq!(
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()),
                0
            );
        }
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .expect("starting sleep");
        // Wait for the exec: /proc/<pid>/comm names the program.
        let comm = format!("/proc/{}/comm", child.id());
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::fs::read_to_string(&comm).unwrap_or_default().trim() != "sleep" {
            assert!(std::time::Instant::now() < deadline, "sleep never ran");
            std::thread::sleep(Duration::from_millis(5));
        }
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
            .expect("reading the child's status");
        child.kill().expect("killing sleep");
        child.wait().expect("reaping sleep");
        let mask = status
            .lines()
            .find_map(|line| line.strip_prefix("SigBlk:"))
            .expect("a SigBlk line")
            .trim()
            .to_string();
        u64::from_str_radix(&mask, 16).expect("a hex mask")
    })
    .join()
    .expect("the spawning thread");
    assert_eq!(blocked, 1 << (libc::SIGTERM - 1), "SigBlk {blocked:x}");
}
