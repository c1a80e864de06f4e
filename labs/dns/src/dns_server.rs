//! The lab's authoritative DNS server: a UDP responder on 127.0.0.1, a port
//! the kernel picks, that answers A and AAAA questions from a table the lab
//! can change while it runs, with one TTL, an optional delay before each
//! answer, and a log of every question it received.
//!
//! Why not hickory-server: the lab needs four things from a server (answer a
//! name, change the answer, slow down, say what it was asked), and a DNS
//! question and answer over UDP are a few dozen bytes of fixed layout
//! (RFC 1035, section 4). The responder below is the whole of it; the
//! server crate would add its own zone machinery and a second large
//! dependency to every reader's build, for nothing the chapter shows.

use std::{
    collections::HashMap,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use lab_kit::net::AbortOnDrop;
use tokio::{net::UdpSocket, task::JoinSet};

/// Record type codes (RFC 1035 3.2.2, RFC 3596).
pub const TYPE_A: u16 = 1;
pub const TYPE_AAAA: u16 = 28;
pub const CLASS_IN: u16 = 1;
/// Response codes (RFC 1035 4.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
enum Rcode {
    NoError = 0,
    FormErr = 1,
    ServFail = 2,
    NxDomain = 3,
}

/// One question the server received, in the order they arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedQuery {
    /// Milliseconds since the server started.
    pub at_ms: f64,
    /// The name asked, lowercase, without the trailing dot.
    pub name: String,
    /// "A", "AAAA" or the type's number.
    pub kind: String,
    /// "answer", "nodata" (the name exists, not with that type) or "nxdomain".
    pub outcome: &'static str,
}

/// What the server knows and what it was asked: the state [`respond`] reads
/// and writes.
#[derive(Default)]
pub struct Zone {
    /// Name (lowercase, no trailing dot) to addresses.
    pub records: HashMap<String, Vec<IpAddr>>,
    /// Names answered SERVFAIL (the server could not answer, as when its
    /// upstream is down), whatever `records` holds.
    pub failing: Vec<String>,
    pub ttl_s: u32,
    pub delay: Duration,
    pub log: Vec<LoggedQuery>,
}

/// A running server; dropping it stops it and every answer it was delaying.
pub struct DnsServer {
    pub addr: SocketAddr,
    zone: Arc<Mutex<Zone>>,
    _task: AbortOnDrop,
}

impl DnsServer {
    /// Starts the server with an empty table: every name is NXDOMAIN until
    /// [`DnsServer::set`] adds it.
    pub async fn start(ttl_s: u32, delay: Duration) -> Result<DnsServer> {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .context("binding the DNS server on 127.0.0.1:0")?;
        let addr = socket.local_addr().context("reading the DNS address")?;
        let zone = Arc::new(Mutex::new(Zone {
            ttl_s,
            delay,
            ..Zone::default()
        }));
        let task = AbortOnDrop::spawn(serve(Arc::new(socket), Arc::clone(&zone)));
        Ok(DnsServer {
            addr,
            zone,
            _task: task,
        })
    }

    /// Sets (or replaces) the addresses of `name`: the DNS switch of a
    /// blue/green deploy is one call.
    pub fn set(&self, name: &str, addresses: &[IpAddr]) {
        let mut zone = self.zone.lock().expect("the zone lock");
        zone.records.insert(normalise(name), addresses.to_vec());
    }

    /// Answers SERVFAIL for `name` from now on.
    pub fn set_failing(&self, name: &str) {
        let mut zone = self.zone.lock().expect("the zone lock");
        zone.failing.push(normalise(name));
    }

    pub fn set_delay(&self, delay: Duration) {
        self.zone.lock().expect("the zone lock").delay = delay;
    }

    /// Every question received so far.
    pub fn queries(&self) -> Vec<LoggedQuery> {
        self.zone.lock().expect("the zone lock").log.clone()
    }

    /// Forgets the log, so the next part counts from zero.
    pub fn clear_log(&self) {
        self.zone.lock().expect("the zone lock").log.clear();
    }
}

fn normalise(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

async fn serve(socket: Arc<UdpSocket>, zone: Arc<Mutex<Zone>>) {
    let started = Instant::now();
    // The delayed answers live in this set, so stopping the server stops them.
    let mut answering = JoinSet::new();
    let mut buffer = vec![0u8; 1500];
    loop {
        let Ok((length, peer)) = socket.recv_from(&mut buffer).await else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        while answering.try_join_next().is_some() {}
        let (reply, delay) = {
            let mut zone = zone.lock().expect("the zone lock");
            let reply = respond(&buffer[..length], &mut zone, started);
            (reply, zone.delay)
        };
        let Some(reply) = reply else { continue };
        let socket = Arc::clone(&socket);
        answering.spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let _ = socket.send_to(&reply, peer).await;
        });
    }
}

// ANCHOR: respond
/// The answer to one query datagram, or `None` for one too short to answer.
/// Layout (RFC 1035 4.1): a 12-byte header (id, flags, four counts), the
/// question (the name as length-prefixed labels, a type, a class), then the
/// answers, each pointing back at the question's name, or for a negative
/// answer one SOA record.
pub fn respond(query: &[u8], zone: &mut Zone, started: Instant) -> Option<Vec<u8>> {
    if query.len() < 12 {
        return None;
    }
    let flags = u16::from_be_bytes([query[2], query[3]]);
    let recursion_desired = flags & 0x0100;
    let header = |rcode: Rcode, answers: u16, with_question: bool| {
        let mut reply = Vec::with_capacity(512);
        reply.extend_from_slice(&query[..2]); // the id, echoed
        // QR (a response), AA (authoritative), RD copied, the rcode.
        reply
            .extend_from_slice(&(0x8000 | 0x0400 | recursion_desired | rcode as u16).to_be_bytes());
        reply.extend_from_slice(&u16::from(with_question).to_be_bytes());
        reply.extend_from_slice(&answers.to_be_bytes());
        reply.extend_from_slice(&[0, 0, 0, 0]); // no authority, no additional
        reply
    };
    let question_count = u16::from_be_bytes([query[4], query[5]]);
    let Some((name, question_end)) = read_name(query, 12).filter(|_| question_count == 1) else {
        return Some(header(Rcode::FormErr, 0, false));
    };
    if question_end + 4 > query.len() {
        return Some(header(Rcode::FormErr, 0, false));
    }
    let kind = u16::from_be_bytes([query[question_end], query[question_end + 1]]);
    let class = u16::from_be_bytes([query[question_end + 2], query[question_end + 3]]);
    let addresses: Option<Vec<IpAddr>> = zone.records.get(&name).map(|all| {
        all.iter()
            .copied()
            .filter(|address| match kind {
                TYPE_A => address.is_ipv4(),
                TYPE_AAAA => address.is_ipv6(),
                _ => false,
            })
            .filter(|_| class == CLASS_IN)
            .collect()
    });
    let (rcode, outcome, answers) = match addresses {
        _ if zone.failing.contains(&name) => (Rcode::ServFail, "servfail", Vec::new()),
        None => (Rcode::NxDomain, "nxdomain", Vec::new()),
        Some(found) if found.is_empty() => (Rcode::NoError, "nodata", found),
        Some(found) => (Rcode::NoError, "answer", found),
    };
    zone.log.push(LoggedQuery {
        at_ms: started.elapsed().as_secs_f64() * 1000.0,
        name,
        kind: match kind {
            TYPE_A => "A".to_string(),
            TYPE_AAAA => "AAAA".to_string(),
            other => other.to_string(),
        },
        outcome,
    });
    let mut reply = header(rcode, answers.len() as u16, true);
    // A negative answer carries the SOA; a SERVFAIL answers nothing at all.
    if answers.is_empty() && !matches!(rcode, Rcode::ServFail) {
        reply[9] = 1; // one authority record: the SOA below
    }
    reply.extend_from_slice(&query[12..question_end + 4]); // the question, echoed
    for address in answers {
        reply.extend_from_slice(&[0xC0, 12]); // a pointer to the question's name
        let (kind, data) = match address {
            IpAddr::V4(v4) => (TYPE_A, v4.octets().to_vec()),
            IpAddr::V6(v6) => (TYPE_AAAA, v6.octets().to_vec()),
        };
        reply.extend_from_slice(&kind.to_be_bytes());
        reply.extend_from_slice(&CLASS_IN.to_be_bytes());
        reply.extend_from_slice(&zone.ttl_s.to_be_bytes());
        reply.extend_from_slice(&(data.len() as u16).to_be_bytes());
        reply.extend_from_slice(&data);
    }
    if reply[9] == 1 {
        push_soa(&mut reply, zone.ttl_s);
    }
    Some(reply)
}

/// A negative answer (NXDOMAIN, or no record of the type asked) carries the
/// zone's SOA in its authority section: a resolver caches the negative
/// answer for the SOA's TTL (RFC 2308) and, without one, not at all.
fn push_soa(reply: &mut Vec<u8>, ttl_s: u32) {
    const TYPE_SOA: u16 = 6;
    let mut data = Vec::new();
    for name in ["ns.lab", "hostmaster.lab"] {
        for label in name.split('.') {
            data.push(label.len() as u8);
            data.extend_from_slice(label.as_bytes());
        }
        data.push(0);
    }
    // Serial, refresh, retry, expire, and the minimum: the negative TTL.
    for value in [1u32, 3600, 600, 86400, ttl_s] {
        data.extend_from_slice(&value.to_be_bytes());
    }
    reply.extend_from_slice(&[0xC0, 12]); // owned by the name asked
    reply.extend_from_slice(&TYPE_SOA.to_be_bytes());
    reply.extend_from_slice(&CLASS_IN.to_be_bytes());
    reply.extend_from_slice(&ttl_s.to_be_bytes());
    reply.extend_from_slice(&(data.len() as u16).to_be_bytes());
    reply.extend_from_slice(&data);
}
// ANCHOR_END: respond

/// The name at `start` (uncompressed labels, as a question carries it),
/// lowercase and dot-separated, and the offset just past it.
fn read_name(message: &[u8], start: usize) -> Option<(String, usize)> {
    let mut labels: Vec<String> = Vec::new();
    let mut at = start;
    loop {
        let length = *message.get(at)? as usize;
        at += 1;
        if length == 0 {
            return Some((labels.join("."), at));
        }
        if length > 63 {
            return None; // a compression pointer or a reserved label type
        }
        let label = message.get(at..at + length)?;
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        at += length;
    }
}
