//! Part 7 in quick mode: a `select!` loop against a ticker loses the bytes a
//! dropped `read_exact` had read, and the stream goes out of step; the
//! pinned future and the codec read every frame. The ticks must have found
//! frames half read, or the comparison would prove nothing.

use lab_cancellation::{
    Config,
    cancel_safety::{FrameReader, run_cancel_safety},
};
use lab_kit::{Lab, Mode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_select_loop_loses_bytes_unless_the_read_outlives_the_tick() {
    let config = Config::for_mode(Mode::Quick);
    let reads = run_cancel_safety(&config).await.expect("the part runs");
    for (reader, read) in FrameReader::ALL.iter().zip(&reads) {
        let label = format!("{read:?}");
        assert_eq!(read.reader, reader.name(), "{label}");
        assert!(read.ticks_mid_frame > 0, "{label}");
        match reader {
            FrameReader::Naive => {
                assert!(read.bytes_lost > 0, "{label}");
                assert_eq!(read.frames_corrupt, 1, "{label}");
                assert!(read.frames_intact < read.frames_sent, "{label}");
            }
            FrameReader::Pinned | FrameReader::Framed => {
                assert_eq!(read.frames_intact, read.frames_sent, "{label}");
                assert_eq!((read.frames_corrupt, read.bytes_lost), (0, 0), "{label}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_write_all_sent_again_corrupts_the_stream_and_write_all_buf_does_not() {
    use lab_cancellation::half_written::{FrameWriter, run_half_written};
    let config = Config::for_mode(Mode::Quick);
    let writes = run_half_written(&config).await.expect("the part runs");
    for (writer, wrote) in FrameWriter::ALL.iter().zip(&writes) {
        let label = format!("{wrote:?}");
        assert_eq!(wrote.writer, writer.name(), "{label}");
        // The mechanism needs a write that timed out with part of a frame sent.
        assert!(wrote.timeouts > 0, "{label}");
        match writer {
            FrameWriter::RetryWriteAll => {
                assert_eq!((wrote.frames_corrupt, wrote.frames_cut), (1, 0), "{label}");
                assert!(wrote.frames_intact < wrote.frames, "{label}");
            }
            FrameWriter::Close => {
                assert_eq!((wrote.frames_corrupt, wrote.frames_cut), (0, 1), "{label}");
            }
            FrameWriter::RetryWriteAllBuf => {
                assert_eq!(wrote.frames_intact, wrote.frames, "{label}");
                assert_eq!((wrote.frames_corrupt, wrote.frames_cut), (0, 0), "{label}");
            }
        }
    }
}
