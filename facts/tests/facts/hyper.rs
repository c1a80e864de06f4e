//! hyper 1.x's HTTP/1 server (`hyper::server::conn::http1::Builder`): its one
//! timer, the header read timeout, and what it does without a timer. Read in
//! hyper's source at the pinned version: `src/server/conn/http1.rs` starts the
//! builder with `Dur::Default(Some(30 s))`; `src/common/time.rs` (`Time::check`)
//! turns a default off without a timer and panics on a configured one;
//! `src/proto/h1/conn.rs` arms the timer whenever it waits for a head,
//! including on an idle keep-alive connection.

use std::{convert::Infallible, time::Duration};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use lab_facts::{CompressedTimer, PATIENCE, RawPeer, bounded};
use lab_kit::net::{AbortOnDrop, bind_loopback, spawn_accept_loop};
use tokio::sync::oneshot;

const BOUND: Duration = Duration::from_secs(20);

async fn hello(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    // Read the whole body, so a stalled body stalls the handler.
    let _ = request.into_body().collect().await;
    Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
}

/// An HTTP/1 server made with `builder` for every connection.
async fn serve(builder: http1::Builder) -> (std::net::SocketAddr, AbortOnDrop) {
    let listener = bind_loopback().await.expect("binding");
    let addr = listener.local_addr().expect("address");
    let accept = spawn_accept_loop(listener, move |stream, _| {
        let connection = builder.serve_connection(TokioIo::new(stream), service_fn(hello));
        async move {
            let _ = connection.await;
        }
    });
    (addr, accept)
}

fn with_compressed_timer(timer: &CompressedTimer) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder.timer(timer.clone());
    builder
}

#[tokio::test]
async fn header_read_timeout_is_30_s_with_a_timer() {
    bounded("half a head, timer set", BOUND, async {
        let timer = CompressedTimer::default();
        let (addr, _server) = serve(with_compressed_timer(&timer)).await;
        let mut peer = RawPeer::connect(addr).await;
        peer.send(b"GET / HTTP/1.1\r\nHost: facts\r\n").await;
        let closed = peer
            .closed_within(Duration::from_secs(5))
            .await
            .expect("hyper closed the half-sent head");
        let closed_at = CompressedTimer::compressed(closed);
        assert!(
            timer.asked().contains(&Duration::from_secs(30)),
            "hyper asked for {:?}",
            timer.asked()
        );
        assert!(
            closed_at >= Duration::from_secs(29) && closed_at < Duration::from_secs(60),
            "closed at {closed_at:?} (compressed)"
        );
    })
    .await;
}

#[tokio::test]
async fn idle_keepalive_connection_closes_at_the_header_read_timeout() {
    bounded("idle keep-alive, timer set", BOUND, async {
        let timer = CompressedTimer::default();
        let (addr, _server) = serve(with_compressed_timer(&timer)).await;
        let mut peer = RawPeer::connect(addr).await;
        peer.send(b"GET / HTTP/1.1\r\nHost: facts\r\n\r\n").await;
        peer.read_until("hello").await;
        let closed = peer
            .closed_within(Duration::from_secs(5))
            .await
            .expect("hyper closed the idle connection");
        let closed_at = CompressedTimer::compressed(closed);
        assert!(
            closed_at >= Duration::from_secs(29) && closed_at < Duration::from_secs(60),
            "idle connection closed at {closed_at:?} (compressed)"
        );
    })
    .await;
}

#[tokio::test]
async fn without_a_timer_the_header_read_timeout_is_off() {
    bounded("half a head, no timer", BOUND, async {
        // The same builder as above minus the timer: the default 30 s is
        // skipped (a warning in hyper's log, nothing else).
        let (addr, _server) = serve(http1::Builder::new()).await;
        let mut peer = RawPeer::connect(addr).await;
        peer.send(b"GET / HTTP/1.1\r\nHost: facts\r\n").await;
        // 1.5 s real is 150 s in the compressed tests above: five timeouts.
        assert_eq!(peer.closed_within(Duration::from_millis(1500)).await, None);
    })
    .await;
}

#[tokio::test]
async fn a_configured_header_read_timeout_without_a_timer_panics() {
    bounded("configured timeout, no timer", BOUND, async {
        let listener = bind_loopback().await.expect("binding");
        let addr = listener.local_addr().expect("address");
        let client = tokio::spawn(tokio::net::TcpStream::connect(addr));
        let (stream, _) = listener.accept().await.expect("accepting");
        let mut builder = http1::Builder::new();
        builder.header_read_timeout(Duration::from_secs(10));
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _connection = builder.serve_connection(TokioIo::new(stream), service_fn(hello));
        }))
        .expect_err("serve_connection panics");
        let message = panicked
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panicked.downcast_ref::<&str>().map(|text| text.to_string()))
            .unwrap_or_default();
        assert!(message.contains("no timer"), "{message:?}");
        drop(client);
    })
    .await;
}

#[tokio::test]
async fn a_stalled_body_is_not_timed_even_with_a_timer() {
    bounded("stalled body, timer set", BOUND, async {
        let timer = CompressedTimer::default();
        let (addr, _server) = serve(with_compressed_timer(&timer)).await;
        let mut peer = RawPeer::connect(addr).await;
        peer.send(b"POST / HTTP/1.1\r\nHost: facts\r\nContent-Length: 100\r\n\r\nabc")
            .await;
        // 2 s real is 200 s compressed: the header timeout (30 s) is long
        // past, and hyper has no body, handler or write timeout to fire.
        assert_eq!(peer.closed_within(Duration::from_secs(2)).await, None);
    })
    .await;
}

#[tokio::test]
async fn graceful_shutdown_marks_the_in_flight_response_connection_close() {
    bounded("graceful shutdown in flight", BOUND, async {
        let listener = bind_loopback().await.expect("binding");
        let addr = listener.local_addr().expect("address");
        let (release_sender, release) = oneshot::channel::<()>();
        let release = std::sync::Mutex::new(Some(release));
        let peer_task = tokio::spawn(async move {
            let mut peer = RawPeer::connect(addr).await;
            peer.send(b"GET / HTTP/1.1\r\nHost: facts\r\n\r\n").await;
            peer.closed_within(PATIENCE).await;
            peer.text()
        });
        let (stream, _) = listener.accept().await.expect("accepting");
        let (entered_sender, entered) = oneshot::channel::<()>();
        let entered_sender = std::sync::Mutex::new(Some(entered_sender));
        let service = service_fn(move |_request: Request<Incoming>| {
            let release = release.lock().expect("not poisoned").take();
            if let Some(entered) = entered_sender.lock().expect("not poisoned").take() {
                let _ = entered.send(());
            }
            async move {
                if let Some(release) = release {
                    let _ = release.await;
                }
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"done"))))
            }
        });
        let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
        tokio::pin!(connection);
        // Drive the connection until the handler has the request.
        tokio::select! {
            _ = entered => {}
            result = connection.as_mut() => panic!("the connection ended first: {result:?}"),
        }
        connection.as_mut().graceful_shutdown();
        let _ = release_sender.send(());
        connection
            .await
            .expect("the connection finishes its response");
        let answer = peer_task.await.expect("the peer task");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
        assert!(
            answer.to_ascii_lowercase().contains("connection: close"),
            "{answer:?}"
        );
    })
    .await;
}
