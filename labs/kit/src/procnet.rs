//! Reads the kernel's socket tables (/proc/net/tcp and /proc/net/tcp6), so a
//! lab can count sockets in a given state as evidence rather than inference,
//! and one socket's own `TCP_INFO`, which costs a system call rather than a
//! walk of the whole table.

use std::fs;

use anyhow::{Context, Result};

/// TCP states as the kernel numbers them in /proc/net/tcp (include/net/tcp_states.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpState {
    Established = 0x01,
    FinWait1 = 0x04,
    FinWait2 = 0x05,
    TimeWait = 0x06,
    Close = 0x07,
    CloseWait = 0x08,
    LastAck = 0x09,
    Listen = 0x0A,
}

/// One row of the socket table: local and remote port, the state number, the
/// kind of timer running (the `tr` of `tr:tm->when`: 3 is `TIME_WAIT`'s), the
/// clock ticks left on it (the `when`; a `TIME_WAIT` socket's time to live),
/// and the socket's inode (what `/proc/<pid>/fd`
/// links name as `socket:[inode]`, so which process holds it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketRow {
    pub local_port: u16,
    pub remote_port: u16,
    pub state: u8,
    pub timer_kind: u8,
    pub timer_ticks: u64,
    pub inode: u64,
}

/// Every TCP socket of this network namespace, IPv4 and IPv6.
pub fn tcp_sockets() -> Result<Vec<SocketRow>> {
    let mut rows = Vec::new();
    for path in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = match fs::read_to_string(path) {
            Ok(text) => text,
            // A kernel without IPv6 has no tcp6 table; that is not an error.
            Err(error) if path.ends_with('6') && error.kind() == std::io::ErrorKind::NotFound => {
                continue;
            }
            Err(error) => return Err(error).with_context(|| format!("reading {path}")),
        };
        rows.extend(parse_table(&text).with_context(|| format!("parsing {path}"))?);
    }
    Ok(rows)
}

/// Parses the text of /proc/net/tcp or /proc/net/tcp6.
pub fn parse_table(text: &str) -> Result<Vec<SocketRow>> {
    let mut rows = Vec::new();
    for line in text.lines().skip(1) {
        let columns: Vec<&str> = line.split_whitespace().collect();
        if columns.len() < 4 {
            continue;
        }
        let port = |address: &str| -> Result<u16> {
            let (_, hex) = address.rsplit_once(':').context("address without a port")?;
            u16::from_str_radix(hex, 16).with_context(|| format!("bad port {hex:?}"))
        };
        let (timer_kind, timer_ticks) = match columns.get(5).and_then(|t| t.split_once(':')) {
            Some((kind, when)) => (
                u8::from_str_radix(kind, 16).with_context(|| format!("bad timer {kind:?}"))?,
                u64::from_str_radix(when, 16).with_context(|| format!("bad timer {when:?}"))?,
            ),
            None => (0, 0),
        };
        rows.push(SocketRow {
            local_port: port(columns[1])?,
            remote_port: port(columns[2])?,
            state: u8::from_str_radix(columns[3], 16)
                .with_context(|| format!("bad state {:?}", columns[3]))?,
            timer_kind,
            timer_ticks,
            inode: match columns.get(9) {
                Some(inode) => inode
                    .parse()
                    .with_context(|| format!("bad inode {inode:?}"))?,
                None => 0,
            },
        });
    }
    Ok(rows)
}

/// The inodes of the sockets process `pid` holds open (its `/proc/<pid>/fd`
/// links that read `socket:[inode]`).
pub fn socket_inodes_of(pid: i32) -> Result<Vec<u64>> {
    let dir = format!("/proc/{pid}/fd");
    let mut inodes = Vec::new();
    for entry in fs::read_dir(&dir).with_context(|| format!("reading {dir}"))? {
        let Ok(target) = fs::read_link(entry?.path()) else {
            continue;
        };
        if let Some(inode) = target
            .to_str()
            .and_then(|target| target.strip_prefix("socket:["))
            .and_then(|rest| rest.strip_suffix(']'))
            .and_then(|inode| inode.parse().ok())
        {
            inodes.push(inode);
        }
    }
    Ok(inodes)
}

/// True when the socket listening on `port` is one `pid` holds: the listener
/// is that process's, not another's that took the port first.
pub fn listens_in(pid: i32, port: u16) -> Result<bool> {
    let held = socket_inodes_of(pid)?;
    Ok(tcp_sockets()?.iter().any(|row| {
        row.local_port == port && row.state == TcpState::Listen as u8 && held.contains(&row.inode)
    }))
}

/// Client-side sockets in `state` whose remote end is `server_port`: on one
/// machine both ends of a loopback connection are in the table, and this
/// picks the client's end.
pub fn count_toward(server_port: u16, state: TcpState) -> Result<usize> {
    Ok(tcp_sockets()?
        .iter()
        .filter(|row| row.remote_port == server_port && row.state == state as u8)
        .count())
}

/// Server-side sockets in `state` on `server_port` (its accepted connections).
pub fn count_at(server_port: u16, state: TcpState) -> Result<usize> {
    Ok(tcp_sockets()?
        .iter()
        .filter(|row| {
            row.local_port == server_port && row.remote_port != 0 && row.state == state as u8
        })
        .count())
}

/// The kernel's count of TCP resets sent, machine-wide (`OutRsts` in
/// /proc/net/snmp). A lab reads it before and after a run; the difference is
/// evidence of connections torn down with RST rather than FIN, as long as
/// nothing else on the machine is resetting connections at the same time.
pub fn resets_sent() -> Result<u64> {
    let text = fs::read_to_string("/proc/net/snmp").context("reading /proc/net/snmp")?;
    parse_snmp_counter(&text, "Tcp:", "OutRsts")
}

/// The kernel's `TCP_INFO` for one socket of this process (its state in
/// `tcpi_state`, numbered as [`TcpState`]). A closed or non-TCP descriptor is
/// an error, never undefined behaviour: the kernel checks it.
pub fn tcp_info(fd: std::os::fd::RawFd) -> std::io::Result<libc::tcp_info> {
    // SAFETY: an all-zero tcp_info is a valid value of that plain C struct.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut length = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is writable and `length` is its size; the kernel writes
    // at most that many bytes.
    let status = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut length,
        )
    };
    if status == 0 {
        Ok(info)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn parse_snmp_counter(text: &str, prefix: &str, name: &str) -> Result<u64> {
    let mut lines = text.lines().filter(|line| line.starts_with(prefix));
    let header = lines
        .next()
        .with_context(|| format!("no {prefix} header"))?;
    let values = lines
        .next()
        .with_context(|| format!("no {prefix} values"))?;
    let column = header
        .split_whitespace()
        .position(|field| field == name)
        .with_context(|| format!("no {name} column"))?;
    let value = values
        .split_whitespace()
        .nth(column)
        .with_context(|| format!("no {name} value"))?;
    value
        .parse()
        .with_context(|| format!("bad {name} value {value:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_kernel_table() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
            0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n   \
            1: 0100007F:C350 0100007F:1F90 06 00000000:00000000 03:00000F8E 00000000     0        0 0 3 0\n";
        let rows = parse_table(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0],
            SocketRow {
                local_port: 8080,
                remote_port: 0,
                state: 0x0A,
                timer_kind: 0,
                timer_ticks: 0,
                inode: 1
            }
        );
        assert_eq!(
            rows[1],
            SocketRow {
                local_port: 50000,
                remote_port: 8080,
                state: 0x06,
                timer_kind: 3,
                timer_ticks: 0xF8E,
                inode: 0
            }
        );
    }

    #[test]
    fn reads_a_counter_by_name() {
        let text =
            "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm OutRsts InErrs\nTcp: 1 42 0\n";
        assert_eq!(parse_snmp_counter(text, "Tcp:", "OutRsts").unwrap(), 42);
        assert!(parse_snmp_counter(text, "Tcp:", "Nope").is_err());
        assert!(resets_sent().is_ok());
    }

    #[test]
    fn reads_this_machines_table() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let rows = tcp_sockets().unwrap();
        assert!(
            rows.iter()
                .any(|row| row.local_port == port && row.state == TcpState::Listen as u8)
        );
        // The listener is this process's, and a port it does not hold is not.
        let me = std::process::id() as i32;
        assert!(listens_in(me, port).unwrap());
        drop(listener);
        assert!(!listens_in(me, port).unwrap());
    }
}
