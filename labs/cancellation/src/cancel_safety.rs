//! Part 7, cancel safety: a loop that `select!`s between a fast ticker and
//! reading the next length-prefixed frame from a socket, written three ways.
//! A server on 127.0.0.1 writes each frame in three pieces a moment apart,
//! as a slow network delivers it, so the ticker often wins while a frame is
//! half read. What a read future had read when `select!` dropped it is gone
//! with it, unless the read's state lives outside the future.
//!
//! Not compressed: the frames are bytes, and the gaps only make the ticker
//! win mid-frame; the counts, not the times, are the result.

use std::{
    io::ErrorKind,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context as TaskContext, Poll},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use futures_util::StreamExt;
use serde::Serialize;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf},
    net::{TcpListener, TcpStream},
};
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};

use crate::Config;

/// A frame longer than this is a length read out of step.
const MAX_FRAME: usize = 4096;

/// How the loop reads its frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameReader {
    /// `read_frame(&mut stream)` written inside `select!`: a new future
    /// each turn of the loop, dropped whenever the ticker wins.
    Naive,
    /// The same `read_frame`, created once per frame and pinned outside the
    /// loop: a tick only pauses it.
    Pinned,
    /// tokio-util's `FramedRead` with `LengthDelimitedCodec`: the bytes read
    /// so far live in the reader's buffer, not in the future.
    Framed,
}

impl FrameReader {
    pub const ALL: [FrameReader; 3] =
        [FrameReader::Naive, FrameReader::Pinned, FrameReader::Framed];

    pub fn name(self) -> &'static str {
        match self {
            FrameReader::Naive => "naive",
            FrameReader::Pinned => "pinned",
            FrameReader::Framed => "framed",
        }
    }

    pub fn series(self) -> String {
        format!("cancel-safety/{}", self.name())
    }
}

/// What one reader got.
#[derive(Debug, Clone, Serialize)]
pub struct FramesRead {
    pub reader: String,
    pub frames_sent: u64,
    /// Frames read whole, with the right length and bytes, in order.
    pub frames_intact: u64,
    /// 1 when a frame came out wrong: the length read was another frame's
    /// bytes. The stream is out of step from there, so the reader stops.
    pub frames_corrupt: u64,
    pub ticks: u64,
    /// Ticks that won while part of a frame had been read off the socket.
    pub ticks_mid_frame: u64,
    /// Bytes read off the socket that no frame ever got: read into a future
    /// that `select!` dropped.
    pub bytes_lost: u64,
    pub read_ms: f64,
}

/// Each reader against a server of its own, side by side (they only wait).
pub async fn run_cancel_safety(config: &Config) -> Result<Vec<FramesRead>> {
    let runs = FrameReader::ALL.map(|reader| read_frames(reader, config));
    let [naive, pinned, framed] = runs;
    let (naive, pinned, framed) = tokio::try_join!(naive, pinned, framed)?;
    Ok(vec![naive, pinned, framed])
}

/// The bytes of frame `index`: a length that varies, and bytes that say
/// which frame and which position they are.
fn frame_payload(index: u64) -> Vec<u8> {
    let length = 64 + (index as usize * 37) % 200;
    (0..length)
        .map(|position| (index as u8).wrapping_mul(31).wrapping_add(position as u8))
        .collect()
}

/// Serves one connection: every frame in three pieces, `gap` apart (the
/// first two bytes of its length; the rest of the length and half the
/// bytes; the other half).
async fn write_frames(listener: TcpListener, frames: u64, gap: Duration) -> Result<()> {
    let (mut stream, _) = listener.accept().await.context("accepting the reader")?;
    stream.set_nodelay(true)?;
    for index in 0..frames {
        let payload = frame_payload(index);
        let mut frame = (payload.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&payload);
        let half = 4 + payload.len() / 2;
        for piece in [&frame[..2], &frame[2..half], &frame[half..]] {
            stream.write_all(piece).await?;
            tokio::time::sleep(gap).await;
        }
    }
    stream.shutdown().await?;
    Ok(())
}

/// One reader against a fresh server.
async fn read_frames(reader: FrameReader, config: &Config) -> Result<FramesRead> {
    let listener = lab_kit::net::bind_loopback().await?;
    let addr = listener.local_addr()?;
    let gap = Duration::from_millis(config.safety_piece_gap_ms);
    let writer = tokio::spawn(write_frames(listener, config.safety_frames, gap));
    let stream = TcpStream::connect(addr)
        .await
        .context("connecting to the frame server")?;
    let read_total = Arc::new(AtomicU64::new(0));
    let counted = Counted {
        inner: stream,
        read: Arc::clone(&read_total),
    };
    let mut tally = Tally::new(config.safety_frames, read_total);
    let tick = Duration::from_millis(config.safety_tick_ms);
    let started = Instant::now();
    let limit = Duration::from_secs(10);
    let reading = async {
        match reader {
            FrameReader::Naive => naive_loop(counted, tick, &mut tally).await,
            FrameReader::Pinned => pinned_loop(counted, tick, &mut tally).await,
            FrameReader::Framed => framed_loop(counted, tick, &mut tally).await,
        }
    };
    tokio::time::timeout(limit, reading)
        .await
        .with_context(|| {
            format!(
                "the {} reader did not finish within {limit:?}",
                reader.name()
            )
        })??;
    let read_ms = started.elapsed().as_secs_f64() * 1000.0;
    // A reader that stopped early closed its socket: the server's writes may
    // fail then, which is not this part's error.
    writer.abort();
    Ok(tally.finish(reader, read_ms))
}

// ANCHOR: read_frame
/// Reads one frame: a 4-byte big-endian length, then that many bytes.
/// `None` at the end of the stream.
async fn read_frame(stream: &mut (impl AsyncRead + Unpin)) -> Result<Option<Vec<u8>>> {
    let mut length = [0u8; 4];
    match stream.read_exact(&mut length).await {
        Err(error) if error.kind() == ErrorKind::UnexpectedEof => return Ok(None),
        read => read.context("reading a frame's length")?,
    };
    let length = u32::from_be_bytes(length) as usize;
    if length > MAX_FRAME {
        bail!("a frame of {length} bytes: the stream is out of step");
    }
    let mut payload = vec![0; length];
    stream
        .read_exact(&mut payload)
        .await
        .context("reading a frame")?;
    Ok(Some(payload))
}
// ANCHOR_END: read_frame

/// The bug: a new `read_frame` future every turn of the loop.
async fn naive_loop(mut stream: Counted, every: Duration, tally: &mut Tally) -> Result<()> {
    // ANCHOR: naive
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = tick.tick() => tally.tick(),
            // Dropped, with whatever it had read, each time the tick wins.
            frame = read_frame(&mut stream) => match frame {
                Ok(Some(payload)) => if !tally.frame(&payload) { break },
                Ok(None) => break,
                Err(_) => { tally.corrupt(); break }
            },
        }
    }
    // ANCHOR_END: naive
    Ok(())
}

/// The fix by hand: the frame's future outlives the ticks. It owns the
/// stream and hands it back with the frame, so the next one can be made.
async fn pinned_loop(stream: Counted, every: Duration, tally: &mut Tally) -> Result<()> {
    async fn next_frame(mut stream: Counted) -> (Counted, Result<Option<Vec<u8>>>) {
        let frame = read_frame(&mut stream).await;
        (stream, frame)
    }
    // ANCHOR: pinned
    let mut tick = tokio::time::interval(every);
    let mut pending = Box::pin(next_frame(stream));
    loop {
        tokio::select! {
            _ = tick.tick() => tally.tick(),
            // `&mut pending`: the tick pauses this future; it is not dropped.
            (stream, frame) = &mut pending => {
                match frame {
                    Ok(Some(payload)) => if !tally.frame(&payload) { break },
                    Ok(None) => break,
                    Err(_) => { tally.corrupt(); break }
                }
                pending = Box::pin(next_frame(stream));
            }
        }
    }
    // ANCHOR_END: pinned
    Ok(())
}

/// The fix with a codec: the partial frame is in `FramedRead`'s buffer.
async fn framed_loop(stream: Counted, every: Duration, tally: &mut Tally) -> Result<()> {
    // ANCHOR: framed
    let codec = LengthDelimitedCodec::builder()
        .length_field_length(4)
        .max_frame_length(MAX_FRAME)
        .new_codec();
    let mut frames = FramedRead::new(stream, codec);
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = tick.tick() => tally.tick(),
            // `next()` is cancel safe: dropping it loses nothing.
            frame = frames.next() => match frame {
                Some(Ok(payload)) => if !tally.frame(&payload) { break },
                None => break,
                Some(Err(_)) => { tally.corrupt(); break }
            },
        }
    }
    // ANCHOR_END: framed
    Ok(())
}

/// Counts as the loop goes: frames checked against what the server sent,
/// ticks, and whether a tick found part of a frame already read.
struct Tally {
    sent: u64,
    intact: u64,
    corrupt: u64,
    ticks: u64,
    ticks_mid_frame: u64,
    /// Bytes the frames read so far account for (length and payload).
    consumed: u64,
    read_total: Arc<AtomicU64>,
}

impl Tally {
    fn new(sent: u64, read_total: Arc<AtomicU64>) -> Tally {
        Tally {
            sent,
            intact: 0,
            corrupt: 0,
            ticks: 0,
            ticks_mid_frame: 0,
            consumed: 0,
            read_total,
        }
    }

    fn tick(&mut self) {
        self.ticks += 1;
        if self.read_total.load(Ordering::Relaxed) > self.consumed {
            self.ticks_mid_frame += 1;
        }
    }

    /// Checks the next frame; false once one is wrong.
    fn frame(&mut self, payload: &[u8]) -> bool {
        if payload != frame_payload(self.intact).as_slice() {
            self.corrupt = 1;
            return false;
        }
        self.intact += 1;
        self.consumed += 4 + payload.len() as u64;
        true
    }

    fn corrupt(&mut self) {
        self.corrupt = 1;
    }

    fn finish(self, reader: FrameReader, read_ms: f64) -> FramesRead {
        // Everything read off the socket that no intact frame accounts for:
        // bytes dropped with a read future, and those of the frame that came
        // out wrong.
        let lost = self
            .read_total
            .load(Ordering::Relaxed)
            .saturating_sub(self.consumed);
        FramesRead {
            reader: reader.name().to_string(),
            frames_sent: self.sent,
            frames_intact: self.intact,
            frames_corrupt: self.corrupt,
            ticks: self.ticks,
            ticks_mid_frame: self.ticks_mid_frame,
            bytes_lost: lost,
            read_ms,
        }
    }
}

/// The socket, counting every byte read off it.
struct Counted {
    inner: TcpStream,
    read: Arc<AtomicU64>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let added = (buf.filled().len() - before) as u64;
        self.read.fetch_add(added, Ordering::Relaxed);
        polled
    }
}
