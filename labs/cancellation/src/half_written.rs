//! Part 7, the write side: `timeout` around a write to a reader that drains
//! slowly. Both sockets have small buffers, so a frame does not fit in them
//! and the write waits for the reader; the timeout then drops it with part of
//! the frame sent. Three writers: `write_all` again on the same connection
//! (it starts the frame over, after the part already sent), the connection
//! closed on a timeout, and `write_all_buf`, whose buffer remembers how far
//! it got, so a second call goes on from there.

use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpSocket, TcpStream},
};

use crate::Config;

/// Small socket buffers on both sides: a frame waits for the reader.
const SOCKET_BUFFER: u32 = 8 * 1024;
/// What the slow reader takes off the socket at a time.
const READ_CHUNK: usize = 2 * 1024;
/// Tries per frame before the writer gives up on the connection.
const MOST_TRIES: u32 = 20;

/// What the writer does when a frame's write times out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameWriter {
    /// `write_all(&frame)` again, on the same connection.
    RetryWriteAll,
    /// Closes the connection: the reader sees the frame cut off.
    Close,
    /// `write_all_buf(&mut frame)` again: it goes on where it stopped.
    RetryWriteAllBuf,
}

impl FrameWriter {
    pub const ALL: [FrameWriter; 3] = [
        FrameWriter::RetryWriteAll,
        FrameWriter::Close,
        FrameWriter::RetryWriteAllBuf,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FrameWriter::RetryWriteAll => "retry-write-all",
            FrameWriter::Close => "close",
            FrameWriter::RetryWriteAllBuf => "retry-write-all-buf",
        }
    }

    pub fn series(self) -> String {
        format!("half-written/{}", self.name())
    }
}

/// What the writer did and the reader got.
#[derive(Debug, Clone, Serialize)]
pub struct FramesWritten {
    pub writer: String,
    pub frames: u64,
    /// Frames whose write completed.
    pub frames_written: u64,
    /// Writes the timeout dropped with part of a frame sent.
    pub timeouts: u64,
    pub frames_intact: u64,
    /// 1 when a frame came out wrong: bytes of another frame inside it.
    pub frames_corrupt: u64,
    /// 1 when the connection ended inside a frame.
    pub frames_cut: u64,
}

/// Each writer against a slow reader of its own, side by side.
pub async fn run_half_written(config: &Config) -> Result<Vec<FramesWritten>> {
    let [retry, close, buf] = FrameWriter::ALL.map(|writer| write_frames(writer, config));
    let (retry, close, buf) = tokio::try_join!(retry, close, buf)?;
    Ok(vec![retry, close, buf])
}

/// The bytes of frame `index`, after its 4-byte length.
fn payload(index: u64, length: usize) -> Vec<u8> {
    (0..length)
        .map(|position| {
            (index as u8)
                .wrapping_mul(7)
                .wrapping_add((position / 256) as u8)
        })
        .collect()
}

/// One frame with its length in front.
fn frame(index: u64, length: usize) -> Vec<u8> {
    let mut bytes = (length as u32).to_be_bytes().to_vec();
    bytes.extend(payload(index, length));
    bytes
}

async fn write_frames(writer: FrameWriter, config: &Config) -> Result<FramesWritten> {
    let listener = TcpSocket::new_v4()?;
    listener.set_recv_buffer_size(SOCKET_BUFFER)?;
    listener.bind((std::net::Ipv4Addr::LOCALHOST, 0).into())?;
    let listener = listener.listen(8)?;
    let addr = listener.local_addr()?;
    let (frames, length) = (config.half_frames, config.half_frame_bytes);
    let reading = tokio::spawn(async move {
        let (stream, _) = listener.accept().await?;
        read_slowly(stream, length).await
    });
    let socket = TcpSocket::new_v4()?;
    socket.set_send_buffer_size(SOCKET_BUFFER)?;
    let mut stream = socket
        .connect(addr)
        .await
        .context("connecting to the reader")?;
    let limit = Duration::from_millis(config.half_write_timeout_ms);
    let (mut timeouts, mut written) = (0, 0);
    'frames: for index in 0..frames {
        // ANCHOR: retry
        let bytes = frame(index, length);
        let mut remaining = bytes.as_slice();
        for _try in 0..MOST_TRIES {
            let attempt = match writer {
                // Its buffer is a cursor: a second call goes on from there.
                FrameWriter::RetryWriteAllBuf => {
                    tokio::time::timeout(limit, stream.write_all_buf(&mut remaining)).await
                }
                // Starts the frame over, after the part already sent.
                _ => tokio::time::timeout(limit, stream.write_all(&bytes)).await,
            };
            match attempt {
                Ok(Ok(())) => {
                    written += 1;
                    continue 'frames;
                }
                // The reader stopped at a frame out of step.
                Ok(Err(_)) => break 'frames,
                Err(_elapsed) => timeouts += 1,
            }
            if writer == FrameWriter::Close {
                break 'frames;
            }
        }
        // ANCHOR_END: retry
        break;
    }
    drop(stream);
    let (intact, corrupt, cut) = tokio::time::timeout(Duration::from_secs(10), reading)
        .await
        .context("the reader did not finish within 10 s")?
        .context("the reader panicked")??;
    Ok(FramesWritten {
        writer: writer.name().to_string(),
        frames,
        frames_written: written,
        timeouts,
        frames_intact: intact,
        frames_corrupt: corrupt,
        frames_cut: cut,
    })
}

/// Reads frames a chunk at a time with a pause between chunks; returns
/// (intact, corrupt, cut). Stops at the first frame that is wrong.
async fn read_slowly(stream: TcpStream, length: usize) -> Result<(u64, u64, u64)> {
    let mut slow = SlowReader { stream };
    let mut intact = 0;
    loop {
        let mut header = [0u8; 4];
        match slow.read_exact(&mut header).await {
            Ok(true) => {}
            // The end of the stream between two frames.
            Ok(false) => return Ok((intact, 0, 0)),
            Err(_) => return Ok((intact, 0, 1)),
        }
        if u32::from_be_bytes(header) as usize != length {
            return Ok((intact, 1, 0));
        }
        let mut body = vec![0; length];
        if !matches!(slow.read_exact(&mut body).await, Ok(true)) {
            return Ok((intact, 0, 1));
        }
        if body != payload(intact, length) {
            return Ok((intact, 1, 0));
        }
        intact += 1;
    }
}

/// A reader that takes at most `READ_CHUNK` bytes a millisecond.
struct SlowReader {
    stream: TcpStream,
}

impl SlowReader {
    /// Fills `buffer`: false at the end of the stream before its first
    /// byte, an error at the end of the stream inside it.
    async fn read_exact(&mut self, buffer: &mut [u8]) -> Result<bool> {
        let mut filled = 0;
        while filled < buffer.len() {
            let end = (filled + READ_CHUNK).min(buffer.len());
            let read = self.stream.read(&mut buffer[filled..end]).await?;
            if read == 0 {
                anyhow::ensure!(filled == 0, "the connection ended inside a frame");
                return Ok(false);
            }
            filled += read;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok(true)
    }
}
