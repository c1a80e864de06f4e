//! A client's local ports: the machine's ephemeral range, and a socket that
//! may only take a port from a small window of it (`IP_LOCAL_PORT_RANGE`,
//! Linux 6.3 and later), so a lab or a facts test can run out of ports
//! without changing any machine setting. conn-reuse's port parts and the
//! facts crate's `ports` tests share it.

use std::{net::SocketAddr, os::fd::AsRawFd};

use anyhow::{Context, Result, anyhow, ensure};
use tokio::net::{TcpSocket, TcpStream};

/// `IP_LOCAL_PORT_RANGE` from Linux's `include/uapi/linux/in.h` (6.3+); the
/// libc crate does not name it yet.
const IP_LOCAL_PORT_RANGE: libc::c_int = 51;

/// The machine's ephemeral range, inclusive.
pub fn ephemeral_range() -> Result<(u32, u32)> {
    let path = "/proc/sys/net/ipv4/ip_local_port_range";
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    let mut numbers = text.split_whitespace().map(str::parse::<u32>);
    match (numbers.next(), numbers.next()) {
        (Some(Ok(low)), Some(Ok(high))) if low <= high => Ok((low, high)),
        _ => Err(anyhow!("ip_local_port_range reads {text:?}")),
    }
}

/// A window of `size` ports inside the machine's range, at a place that
/// differs from run to run, so two runs at once rarely share ports.
pub fn window(size: u32) -> Result<(u32, u32)> {
    let (low, high) = ephemeral_range()?;
    ensure!(
        size >= 1 && size <= high - low + 1,
        "port_window {size} does not fit"
    );
    let spread = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|now| now.subsec_nanos())
        .unwrap_or_default()
        ^ std::process::id();
    let start = low + spread % (high - low + 2 - size);
    Ok((start, start + size - 1))
}

// ANCHOR: window
/// A socket that may only take a local port in `low..=high`, connected to
/// `addr`. The option is per socket: nothing on the machine changes.
pub async fn connect_in_window(
    addr: SocketAddr,
    (low, high): (u32, u32),
) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    let range: u32 = low | (high << 16);
    // SAFETY: a u32 option value on a socket this function owns.
    let status = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            IP_LOCAL_PORT_RANGE,
            (&range as *const u32).cast(),
            size_of::<u32>() as libc::socklen_t,
        )
    };
    if status != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Every port of the window held toward this address (open or in
    // TIME_WAIT): connect fails with EADDRNOTAVAIL, os error 99.
    socket.connect(addr).await
}
// ANCHOR_END: window
