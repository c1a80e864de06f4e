//! The HTTP/2 checks: what differs when the connection multiplexes streams.
//! Each opens a connection of its own ([`wire::H2`]: TLS with ALPN `h2`, or
//! plain TCP with prior knowledge, `--h2c`) and watches the frames the
//! server sends back:
//! - `h2-idle`: an idle connection (one request answered, then nothing)
//!   and a PING on it: GOAWAY or close, against the balancer's idle timeout;
//! - `h2-slow-head`: a header block that never ends (HEADERS without
//!   END_HEADERS, no CONTINUATION): slowloris's analogue;
//! - `h2-slow-body`: a stream whose body stops after 3 of 100 bytes;
//! - `h2-streams`: SETTINGS_MAX_CONCURRENT_STREAMS, and a stream past it;
//! - `h2-cancel`: RST_STREAM(CANCEL) on a slow request, then a request on
//!   the same connection;
//! - `h2-goaway` (with a command): SIGTERM with streams in flight.

mod goaway;
pub mod wire;

pub use goaway::goaway;

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::{
    finding::{Check, Finding, seconds},
    patient::Patient,
};
use wire::{DATA, END_STREAM, End, Frame, H2, HEADERS, MAX_CONCURRENT_STREAMS, RST_STREAM};

/// How long opening a connection (and its handshake) may take.
const OPEN: Duration = Duration::from_secs(5);
/// An answer that comes this fast did not wait for the rest of the body.
const AT_ONCE: Duration = Duration::from_millis(250);
/// The most streams `h2-streams` opens to go past a server's limit.
const MOST_STREAMS: u32 = 1000;

/// A connection for `patient`'s HTTP/2 checks.
pub async fn open(patient: &Patient) -> Result<H2> {
    let connector = patient
        .h2
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("no HTTP/2 for this target (give https:// or --h2c)"))?;
    H2::open(connector, patient.addr, &patient.host, OPEN).await
}

/// Why the HTTP/2 checks cannot run against `patient`, if they cannot:
/// no way to speak it was given, or a connection could not agree on it.
pub async fn unavailable(patient: &Patient) -> Option<String> {
    if patient.h2.is_none() {
        return Some(
            "HTTP/2 needs https:// (ALPN h2) or --h2c (prior knowledge over plain TCP)".into(),
        );
    }
    open(patient)
        .await
        .err()
        .map(|error| format!("no HTTP/2 here: {error:#}"))
}

/// The first request when only HTTP/2 checks were asked for: a GET of
/// `--path` over HTTP/2, answered; what the connection spoke. Every
/// failure means the doctor cannot probe (exit 2).
pub async fn first_answer(patient: &Patient) -> Result<String> {
    let mut h2 = match open(patient).await {
        Ok(h2) => h2,
        Err(error) => match (error.downcast_ref::<std::io::Error>(), &patient.options.tls) {
            (Some(io), Some(_)) => {
                anyhow::bail!(
                    "{}",
                    crate::tls::connect_failure(io, patient.addr, &patient.host)
                )
            }
            _ => return Err(error),
        },
    };
    h2.request(1, "GET", &patient.options.paths.fast, true)
        .await?;
    answer(&mut h2, 1, Duration::from_secs(5)).await?;
    Ok(match &patient.options.tls {
        Some(trust) => crate::tls::describe(h2.conn(), trust).unwrap_or_default(),
        None => "plain TCP, HTTP/2 with prior knowledge".to_string(),
    })
}

/// The first thing the server did in `frames` and how the connection
/// ended: "GOAWAY NO_ERROR (last stream 1) after 2.00 s, then closed".
pub(crate) fn what_happened(
    frames: &[(Duration, Frame)],
    end: Option<(Duration, End)>,
) -> Option<(Duration, String)> {
    let goaway = frames
        .iter()
        .find_map(|(at, frame)| frame.goaway().map(|(last, code)| (*at, last, code)));
    let ended = end.map(|(at, how)| {
        let how = match how {
            End::Closed => "closed",
            End::Reset => "reset",
        };
        (at, how)
    });
    match (goaway, ended) {
        (Some((at, last, code)), ended) => {
            let then = ended.map_or(String::new(), |(_, how)| format!(", then {how}"));
            let name = wire::error_name(code);
            Some((
                at,
                format!(
                    "GOAWAY {name} (last stream {last}) after {}{then}",
                    seconds(at)
                ),
            ))
        }
        (None, Some((at, how))) => Some((at, format!("{how} after {}", seconds(at)))),
        (None, None) => None,
    }
}

/// Watches `h2` for `window` from `since`, noting when each frame came.
pub(crate) async fn watch_from(
    h2: &mut H2,
    since: Instant,
    window: Duration,
) -> (Vec<(Duration, Frame)>, Option<(Duration, End)>) {
    let mut frames = Vec::new();
    let deadline = since + window;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let (end, seen) = h2.watch_one(left).await;
        let at = since.elapsed();
        frames.extend(seen.map(|frame| (at, frame)));
        if let Some(end) = end {
            return (frames, Some((at, end)));
        }
        if Instant::now() >= deadline {
            return (frames, None);
        }
    }
}

/// Reads until `stream`'s answer has ended (END_STREAM, or a reset): its
/// status, if a HEADERS came. Within `limit`.
async fn answer(h2: &mut H2, stream: u32, limit: Duration) -> Result<Option<u16>> {
    let mut status = None;
    let work = async {
        loop {
            let Some(frame) = h2.next().await? else {
                anyhow::bail!("the connection ended before stream {stream} was answered");
            };
            if frame.kind == HEADERS && status.is_none() {
                status = h2.status(&frame);
            }
            if frame.stream == stream && (frame.ends_stream() || frame.kind == RST_STREAM) {
                return Ok(status);
            }
        }
    };
    tokio::time::timeout(limit, work)
        .await
        .map_err(|_| anyhow::anyhow!("stream {stream} was not answered within {limit:?}"))?
}

pub async fn idle(patient: &Patient) -> Result<Finding> {
    let check = Check::H2Idle;
    let (balancer, window) = (patient.options.balancer_idle, patient.options.window);
    let mut h2 = open(patient).await?;
    h2.request(1, "GET", &patient.options.paths.fast, true)
        .await?;
    answer(&mut h2, 1, Duration::from_secs(5)).await?;
    let idle_since = Instant::now();
    // A PING at once: the server must answer it (an ACK with the same 8
    // bytes); the round trip is the connection's liveness, as a client's
    // keep-alive PING would see it.
    h2.send(&wire::frame(wire::PING, 0, 0, b"doctor!!")).await?;
    let (frames, end) = watch_from(&mut h2, idle_since, window).await;
    let pinged = frames
        .iter()
        .find(|(_, frame)| frame.kind == wire::PING && frame.flags & wire::ACK != 0)
        .map(|(at, _)| format!("; PING answered in {:.1} ms", at.as_secs_f64() * 1000.0))
        .unwrap_or_else(|| "; PING not answered".to_string());
    Ok(match what_happened(&frames, end) {
        Some((at, what)) if at <= balancer => Finding::fail(
            check,
            format!("{what}{pinged}"),
            Some(at.as_secs_f64()),
            format!(
                "it ends an idle HTTP/2 connection before the balancer's {} idle timeout: the \
                 balancer can send a stream onto a connection being closed, and streams above \
                 the GOAWAY's last id fail (set its idle timeout above the balancer's)",
                seconds(balancer)
            ),
        ),
        Some((at, what)) => Finding::pass(
            check,
            format!("{what}{pinged}"),
            Some(at.as_secs_f64()),
            "after the balancer's idle timeout, with a GOAWAY if it says one: the balancer \
             closes first",
        ),
        None => Finding::warn(
            check,
            format!("still open at {}{pinged}", seconds(window)),
            Some(window.as_secs_f64()),
            "an idle HTTP/2 connection it never ends holds a socket and its task: safe behind a \
             balancer that closes first, but nothing reclaims it",
        ),
    })
}

pub async fn slow_head(patient: &Patient) -> Result<Finding> {
    let check = Check::H2SlowHead;
    let window = patient.options.window;
    let mut h2 = open(patient).await?;
    let block = h2.header_block("GET", &patient.options.paths.fast, &[]);
    // Half the header block, without END_HEADERS: the server may read
    // nothing else on this connection until a CONTINUATION ends it.
    let half = &block[..block.len() / 2];
    h2.acknowledge = false;
    let started = Instant::now();
    h2.send(&wire::frame(HEADERS, END_STREAM, 1, half)).await?;
    let (frames, end) = watch_from(&mut h2, started, window).await;
    Ok(ended_in_time(
        check,
        what_happened(&frames, end),
        window,
        "a header block that never ends",
    ))
}

pub async fn slow_body(patient: &Patient) -> Result<Finding> {
    let check = Check::H2SlowBody;
    let window = patient.options.window;
    let path = match patient.options.paths.for_check(check) {
        Ok(path) => path.to_string(),
        Err(skipped) => return Ok(skipped),
    };
    let mut h2 = open(patient).await?;
    let block = h2.header_block("POST", &path, &[("content-length", "100")]);
    h2.send(&wire::frame(HEADERS, wire::END_HEADERS, 1, &block))
        .await?;
    let started = Instant::now();
    h2.send(&wire::frame(DATA, 0, 1, b"abc")).await?;
    let (frames, end) = watch_from(&mut h2, started, window).await;
    // What happened to the stream itself: an answer, or a reset.
    let on_stream = frames
        .iter()
        .find(|(_, frame)| frame.stream == 1 && matches!(frame.kind, HEADERS | RST_STREAM));
    let stream_end = match on_stream {
        Some((at, frame)) if frame.kind == HEADERS => {
            let status = h2.status(frame).unwrap_or(0);
            if *at < AT_ONCE && !matches!(status, 400 | 408 | 413) {
                return Ok(Finding::skip(
                    check,
                    format!(
                        "POST {path} answered {status} at once without waiting for the body: \
                         give --body-path a route that reads one"
                    ),
                ));
            }
            Some((*at, format!("answered {status} after {}", seconds(*at))))
        }
        Some((at, frame)) => Some((
            *at,
            format!(
                "stream reset ({}) after {}",
                wire::error_name(frame.reset_code().unwrap_or(0)),
                seconds(*at)
            ),
        )),
        None => None,
    };
    let first = stream_end.or_else(|| what_happened(&frames, end));
    Ok(ended_in_time(
        check,
        first,
        window,
        "a body that stops after 3 of 100 bytes",
    ))
}

/// Pass when the server did something within the window; fail when the
/// stream or connection was still waiting at its end.
fn ended_in_time(
    check: Check,
    first: Option<(Duration, String)>,
    window: Duration,
    what: &str,
) -> Finding {
    let cost = "each such stream or connection holds its buffers and a task (give it a timeout)";
    Finding::ended_in_time(check, first, window, what, cost)
}

pub async fn streams(patient: &Patient) -> Result<Finding> {
    let check = Check::H2Streams;
    let mut h2 = open(patient).await?;
    let Some(limit) = h2.setting(MAX_CONCURRENT_STREAMS) else {
        return Ok(Finding::warn(
            check,
            "no SETTINGS_MAX_CONCURRENT_STREAMS",
            None,
            "it advertises no stream limit: one client may open as many streams at once as it \
             likes, each with its task",
        ));
    };
    let value = Some(f64::from(limit));
    // Streams count against the limit while the server works on them: a
    // route that answers at once frees each before the next arrives.
    let slow = match patient.options.paths.for_check(Check::HandlerDeadline) {
        Ok(path) => path.to_string(),
        Err(_) => {
            return Ok(Finding::skip(
                check,
                format!(
                    "SETTINGS_MAX_CONCURRENT_STREAMS {limit}; give --slow-path a slow route to \
                     see what it does with a stream past it"
                ),
            ));
        }
    };
    if patient.remote() {
        return Ok(Finding::skip(
            check,
            format!(
                "SETTINGS_MAX_CONCURRENT_STREAMS {limit}; against a host that is not loopback \
                 the doctor does not open that many slow requests"
            ),
        ));
    }
    if limit >= MOST_STREAMS {
        return Ok(Finding::warn(
            check,
            format!("SETTINGS_MAX_CONCURRENT_STREAMS {limit}"),
            value,
            format!(
                "a limit of {limit}: the doctor opens at most {MOST_STREAMS} streams, so it \
                 cannot go past it; that many slow handlers at once is a lot of work for one \
                 client"
            ),
        ));
    }
    // One more stream on the slow route than the limit, all at once.
    for index in 0..=limit {
        h2.request(1 + 2 * index, "GET", &slow, true).await?;
    }
    let started = Instant::now();
    let (frames, end) = watch_from(&mut h2, started, Duration::from_secs(2)).await;
    Ok(past_the_limit(&mut h2, &frames, end, limit))
}

/// What the server did with the stream past its `limit`, from the frames
/// that came after the streams went out.
fn past_the_limit(
    h2: &mut H2,
    frames: &[(Duration, Frame)],
    end: Option<(Duration, End)>,
    limit: u32,
) -> Finding {
    let (check, value, extra) = (Check::H2Streams, Some(f64::from(limit)), 1 + 2 * limit);
    let measured = |what: String| format!("limit {limit}; stream {} past it: {what}", limit + 1);
    let on_extra = frames
        .iter()
        .find(|(_, frame)| frame.stream == extra && matches!(frame.kind, HEADERS | RST_STREAM));
    match on_extra {
        Some((_, frame)) if frame.reset_code() == Some(0x7) => Finding::pass(
            check,
            measured("RST_STREAM REFUSED_STREAM".into()),
            value,
            "it refuses a stream past its limit with REFUSED_STREAM, which tells the client the \
             request was not processed and may be retried",
        ),
        Some((_, frame)) if frame.kind == RST_STREAM => Finding::warn(
            check,
            measured(format!(
                "RST_STREAM {}",
                wire::error_name(frame.reset_code().unwrap_or(0))
            )),
            value,
            "refused, but not with REFUSED_STREAM: the client cannot tell whether the request \
             was processed, so it may not retry it safely",
        ),
        Some((at, frame)) => {
            let status = h2.status(frame).unwrap_or(0);
            Finding::warn(
                check,
                measured(format!("answered {status} after {}", seconds(*at))),
                value,
                "it answered a stream past its limit while the slow ones ran (or they were not \
                 slow): the limit did not bound its work",
            )
        }
        None => {
            let what = match what_happened(frames, end) {
                Some((_, what)) => what,
                None => "neither answered nor refused within 2.00 s".to_string(),
            };
            Finding::warn(
                check,
                measured(what),
                value,
                "the stream past the limit waits with no word: the client learns nothing it can \
                 retry on",
            )
        }
    }
}

pub async fn cancel(patient: &Patient) -> Result<Finding> {
    let check = Check::H2Cancel;
    let slow = match patient.options.paths.for_check(check) {
        Ok(path) => path.to_string(),
        Err(skipped) => return Ok(skipped),
    };
    let mut h2 = open(patient).await?;
    h2.request(1, "GET", &slow, true).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The client leaves: RST_STREAM(CANCEL), the connection kept.
    h2.send(&wire::frame(RST_STREAM, 0, 1, &0x8u32.to_be_bytes()))
        .await?;
    let started = Instant::now();
    h2.request(3, "GET", &patient.options.paths.fast, true)
        .await?;
    Ok(match answer(&mut h2, 3, Duration::from_secs(5)).await {
        Ok(Some(status)) => {
            let took = started.elapsed();
            Finding::pass(
                check,
                format!(
                    "after RST_STREAM(CANCEL), the next request answered {status} in {}",
                    seconds(took)
                ),
                Some(took.as_secs_f64()),
                "a client that leaves resets only its stream: the connection and its other \
                 streams go on (whether the handler stops is the server's part: cancellation \
                 chapter)",
            )
        }
        Ok(None) | Err(_) => Finding::fail(
            check,
            "after RST_STREAM(CANCEL), the next request was not answered",
            None,
            "a stream reset cost the whole connection: every other stream on it failed with it",
        ),
    })
}
