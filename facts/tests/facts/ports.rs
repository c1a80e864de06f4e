//! Linux and local ports: `connect` fails with `EADDRNOTAVAIL` when every
//! port it may take is held toward that address, and a loopback connection
//! may take a port in `TIME_WAIT` again once it is a second old. Each test
//! narrows the range of its own sockets (`IP_LOCAL_PORT_RANGE`, Linux 6.3+),
//! so it changes no machine setting and needs no root.

use std::{net::SocketAddr, time::Duration};

use lab_facts::bounded;
use lab_kit::{net::bind_loopback, ports::connect_in_window};
use tokio::{
    io::AsyncReadExt,
    net::{TcpListener, TcpStream},
    time::Instant,
};

/// A window of `size` ports inside the machine's ephemeral range.
fn window(size: u32) -> (u32, u32) {
    lab_kit::ports::window(size).expect("a port window")
}

/// A socket limited to `window`, connected to `addr`; a kernel that refuses
/// the port range fails the test by name.
async fn connect_in(addr: SocketAddr, window: (u32, u32)) -> std::io::Result<TcpStream> {
    connect_in_window(addr, window).await.inspect_err(|error| {
        assert_ne!(
            error.raw_os_error(),
            Some(libc::ENOPROTOOPT),
            "IP_LOCAL_PORT_RANGE: {error}"
        );
    })
}

/// How many windows a test tries before it gives up on finding one whose
/// ports are free.
const WINDOWS: usize = 8;

/// A window of `size` ports and `size` connections to `addr` holding every
/// port of it. A port of a window may be taken already: a listener elsewhere
/// on the machine (another test's server on port 0) holds it for every
/// address. No test of that window can pass or fail, so another window is
/// tried, with a line saying so.
async fn held_window(addr: SocketAddr, size: u32) -> ((u32, u32), Vec<TcpStream>) {
    for _ in 0..WINDOWS {
        let window = window(size);
        let mut held = Vec::new();
        while held.len() < size as usize {
            match connect_in(addr, window).await {
                Ok(stream) => held.push(stream),
                Err(error) if error.raw_os_error() == Some(libc::EADDRNOTAVAIL) => break,
                Err(error) => panic!("connecting in {window:?}: {error}"),
            }
        }
        if held.len() == size as usize {
            return (window, held);
        }
        eprintln!(
            "only {} of {size} ports free in {window:?}: trying another window",
            held.len()
        );
    }
    panic!("no window of {size} free ports in {WINDOWS} tries");
}

/// The client closes first, the server reads the end and closes: the client's
/// socket goes to TIME_WAIT holding its port.
async fn close_first(listener: &TcpListener, client: TcpStream) {
    let (mut served, _) = listener.accept().await.expect("accepting");
    drop(client);
    let mut buffer = [0u8; 8];
    assert_eq!(served.read(&mut buffer).await.expect("reading the end"), 0);
}

#[tokio::test]
async fn connect_fails_with_eaddrnotavail_when_every_port_toward_the_address_is_held() {
    bounded("EADDRNOTAVAIL", Duration::from_secs(10), async {
        let (first, second) = (
            bind_loopback().await.expect("binding"),
            bind_loopback().await.expect("binding"),
        );
        // Two open connections hold both ports toward the first listener...
        let (window, _held) = held_window(first.local_addr().expect("address"), 2).await;
        let refused = connect_in(first.local_addr().expect("address"), window)
            .await
            .expect_err("a third connection in a window of two ports");
        assert_eq!(
            refused.raw_os_error(),
            Some(libc::EADDRNOTAVAIL),
            "{refused}"
        );
        assert_eq!(
            refused.to_string(),
            "Cannot assign requested address (os error 99)"
        );
        // ...but only toward that address: another port on the same host
        // takes the same local ports.
        connect_in(second.local_addr().expect("address"), window)
            .await
            .expect("the same window toward another address");
    })
    .await;
}

#[tokio::test]
async fn loopback_takes_a_time_wait_port_again_after_1_s() {
    bounded("tcp_tw_reuse", Duration::from_secs(10), async {
        let reuse = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_tw_reuse")
            .expect("reading tcp_tw_reuse");
        // 2, the default: reuse for loopback connections only.
        assert_eq!(reuse.trim(), "2");
        let listener = bind_loopback().await.expect("binding");
        let addr = listener.local_addr().expect("address");
        let (window, mut held) = held_window(addr, 1).await;
        close_first(&listener, held.remove(0)).await;
        let closed = Instant::now();
        let refused = connect_in(addr, window)
            .await
            .expect_err("the port is in TIME_WAIT");
        assert_eq!(
            refused.raw_os_error(),
            Some(libc::EADDRNOTAVAIL),
            "{refused}"
        );
        let reused_after = loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            match connect_in(addr, window).await {
                Ok(_) => break closed.elapsed(),
                Err(error) if error.raw_os_error() == Some(libc::EADDRNOTAVAIL) => continue,
                Err(error) => panic!("{error}"),
            }
        };
        // Far sooner than TIME_WAIT's 60 s, and not before its second.
        assert!(
            (Duration::from_millis(900)..Duration::from_secs(4)).contains(&reused_after),
            "{reused_after:?}"
        );
    })
    .await;
}
