//! One wrapper for a server's accepted TCP stream, with hooks: the only
//! place in the labs that forwards `AsyncRead` and `AsyncWrite` to a
//! `TcpStream`. A hook is what the wrapper adds: the kit's counting
//! listener counts open connections with one (its `Drop`), the doctor's
//! hardened service times stalled writes with another, since hyper has no
//! write timeout of its own.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll},
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
};

/// What a [`HookedStream`] adds to the stream it forwards to. Both methods
/// default to doing nothing, so a hook that only needs `Drop` is one line.
pub trait StreamHook: Unpin {
    /// A write or flush could not proceed: the socket's send buffer is
    /// full. `Pending` waits for room, as a bare socket would; `Ready`
    /// fails the write with that error. A hook that must act at a moment
    /// registers `context`'s waker with a timer: nothing else polls a write
    /// again when the peer never reads.
    fn write_blocked(&mut self, context: &mut Context<'_>) -> Poll<io::Error> {
        let _ = context;
        Poll::Pending
    }

    /// A write or flush finished, either way.
    fn write_done(&mut self) {}
}

/// A server-side stream that runs its hook's methods around every write.
pub struct HookedStream<H> {
    stream: TcpStream,
    hook: H,
}

impl<H: StreamHook> HookedStream<H> {
    pub fn new(stream: TcpStream, hook: H) -> HookedStream<H> {
        HookedStream { stream, hook }
    }

    pub fn hook(&self) -> &H {
        &self.hook
    }

    /// What a write's poll becomes once the hook has seen it.
    fn hooked<T>(
        &mut self,
        context: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match polled {
            Poll::Pending => self.hook.write_blocked(context).map(Err),
            ready => {
                self.hook.write_done();
                ready
            }
        }
    }
}

impl<H: StreamHook> AsyncRead for HookedStream<H> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(context, buffer)
    }
}

impl<H: StreamHook> AsyncWrite for HookedStream<H> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(context, bytes);
        self.hooked(context, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffers: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(context, buffers);
        self.hooked(context, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.stream).poll_flush(context);
        self.hooked(context, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(context)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Fails a blocked write at once, and counts finished ones.
    #[derive(Default)]
    struct FailWhenBlocked {
        done: usize,
    }

    impl StreamHook for FailWhenBlocked {
        fn write_blocked(&mut self, _: &mut Context<'_>) -> Poll<io::Error> {
            Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, "blocked"))
        }
        fn write_done(&mut self) {
            self.done += 1;
        }
    }

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = crate::net::bind_loopback().await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        (accepted.unwrap().0, client.unwrap())
    }

    #[tokio::test]
    async fn reads_and_writes_pass_through_and_a_blocked_write_takes_the_hooks_error() {
        let (server, mut client) = pair().await;
        let mut hooked = HookedStream::new(server, FailWhenBlocked::default());
        hooked.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        client.write_all(b"pong").await.unwrap();
        hooked.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"pong");
        assert!(hooked.hook().done >= 1);

        // The client reads nothing: the send buffer fills, the next write is
        // Pending, and the hook turns it into its error.
        let chunk = vec![0u8; 64 * 1024];
        let failed = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                if let Err(error) = hooked.write(&chunk).await {
                    return error;
                }
            }
        })
        .await
        .expect("a write blocked within 10 s");
        assert_eq!(failed.kind(), io::ErrorKind::TimedOut);
    }
}
