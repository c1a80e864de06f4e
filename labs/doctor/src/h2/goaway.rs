//! `h2-goaway`: the reader's command started again, three streams in flight
//! on one HTTP/2 connection, then SIGTERM. A graceful HTTP/2 server sends
//! GOAWAY (its last stream id tells the client which streams it will still
//! answer), finishes those streams, then closes; a stream the client opens
//! after the GOAWAY, above that id, is one the server will not process, so
//! the client may retry it elsewhere.

use std::time::{Duration, Instant};

use anyhow::Result;

use super::{open, wire};
use crate::{
    finding::{Check, Finding, seconds},
    options::Target,
    patient::{Patient, start},
};

/// Streams in flight at SIGTERM: 1, 3 and 5.
const IN_FLIGHT: [u32; 3] = [1, 3, 5];
/// The stream opened once the first GOAWAY came.
const AFTER: u32 = 7;

/// Frames until the connection ends (or `until`), each with when it came
/// after `sent`, opening stream 7 the moment the first GOAWAY is read,
/// before the PING a graceful server sends behind it is acknowledged; and
/// whether stream 7 went out.
async fn after_sigterm(
    h2: &mut wire::H2,
    sent: Instant,
    until: Instant,
    fast: &str,
) -> (Vec<(Duration, wire::Frame)>, bool) {
    let mut frames = Vec::new();
    let mut opened_after = false;
    while Instant::now() < until {
        let (ended, seen) = h2
            .watch_one(until.saturating_duration_since(Instant::now()))
            .await;
        if let Some(frame) = seen {
            let first_goaway = frame.kind == wire::GOAWAY && !opened_after;
            frames.push((sent.elapsed(), frame));
            if first_goaway {
                opened_after = h2.request(AFTER, "GET", fast, true).await.is_ok();
            }
        }
        if ended.is_some() {
            break;
        }
    }
    (frames, opened_after)
}

pub async fn goaway(patient: &Patient) -> Result<Finding> {
    let check = Check::H2Goaway;
    let Target::Command { port, command } = &patient.options.target else {
        return Ok(Finding::skip(
            check,
            "give the command that starts the server (--port P -- COMMAND) to check it",
        ));
    };
    let mut child = start(*port, command).await?;
    let mut h2 = open(patient).await?;
    // In flight: the heavy path where there is one (work that takes a while
    // and ends), else the fast one.
    let path = patient
        .options
        .paths
        .heavy
        .clone()
        .unwrap_or_else(|| patient.options.paths.fast.clone());
    for stream in IN_FLIGHT {
        h2.request(stream, "GET", &path, true).await?;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    child.signal(libc::SIGTERM)?;
    let sent = Instant::now();
    let grace = patient.options.grace;
    let until = sent + grace + Duration::from_secs(2);
    let (frames, opened_after) =
        after_sigterm(&mut h2, sent, until, &patient.options.paths.fast).await;
    let exited = child.wait_for(grace).await?;
    let killed = exited.is_none();
    let ended = match exited {
        Some(ended) => ended,
        None => child.kill_group()?,
    };
    Ok(verdict(&frames, opened_after, ended, killed, grace))
}

/// The finding from what came after SIGTERM.
fn verdict(
    frames: &[(Duration, wire::Frame)],
    opened_after: bool,
    ended: lab_kit::child::Ended,
    killed: bool,
    grace: Duration,
) -> Finding {
    let check = Check::H2Goaway;
    let done = |stream: u32| {
        frames
            .iter()
            .any(|(_, frame)| frame.stream == stream && frame.ends_stream())
    };
    let completed = IN_FLIGHT.iter().filter(|stream| done(**stream)).count();
    let goaways: Vec<(Duration, u32, u32)> = frames
        .iter()
        .filter_map(|(at, frame)| frame.goaway().map(|(last, code)| (*at, last, code)))
        .collect();
    let exit = if killed {
        format!("killed after the {} grace period", seconds(grace))
    } else {
        format!("exit {}", ended.describe())
    };
    let Some(&(at, _, code)) = goaways.first() else {
        let measured = format!(
            "no GOAWAY; {completed}/{} in flight completed; {exit}",
            IN_FLIGHT.len()
        );
        return Finding::fail(
            check,
            measured,
            None,
            "it closed its HTTP/2 connections without GOAWAY: a client cannot tell which streams \
             were processed, and retries or fails them all",
        );
    };
    // Its last stream ids, in order: a graceful server may send two, the
    // first with the highest id (2^31 - 1) and the last with the real one.
    let ids: Vec<String> = goaways
        .iter()
        .map(|(_, last, _)| last.to_string())
        .collect();
    let after = if !opened_after {
        String::new()
    } else if done(AFTER) {
        format!("; stream {AFTER}, opened after it, was answered")
    } else {
        format!("; stream {AFTER}, opened after it, was not processed")
    };
    let measured = format!(
        "GOAWAY {} after {} (last stream {}); {completed}/{} in flight completed{after}; {exit}",
        wire::error_name(code),
        seconds(at),
        ids.join(", then "),
        IN_FLIGHT.len()
    );
    let value = Some(at.as_secs_f64());
    if completed == IN_FLIGHT.len() && code == 0 && !killed {
        Finding::pass(
            check,
            measured,
            value,
            "it says GOAWAY, finishes the streams it took, then exits: clients move new \
             streams to another connection without losing any",
        )
    } else {
        Finding::fail(
            check,
            measured,
            value,
            "streams it had taken were lost, or it did not exit within the grace period: \
             drain the connection (hyper's graceful shutdown sends GOAWAY and waits)",
        )
    }
}
