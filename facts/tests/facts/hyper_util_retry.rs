//! hyper-util's legacy client resends a request that a reused connection
//! never wrote (the pool handed out a connection whose close it had not read
//! yet), and only that one. The race is made on purpose: the test runs on one
//! thread and blocks it while the server closes the pooled connection, so the
//! client's connection task cannot see the FIN before the next request is
//! handed to it.

use std::{
    io::{BufRead, BufReader, Write},
    net::{TcpListener, TcpStream},
    sync::mpsc,
    thread,
    time::Duration,
};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};
use lab_facts::{PATIENCE, bounded};

const BOUND: Duration = Duration::from_secs(20);

/// What the server does with the request that comes after the pooled
/// connection's first one.
#[derive(Clone, Copy)]
enum Second {
    /// Close the first connection while idle; answer on a new one.
    CloseWhileIdle,
    /// Read the second request on the first connection, then close it
    /// without an answer.
    CloseAfterReading,
}

/// Reads one request head; false at end of stream.
fn read_head(reader: &mut BufReader<TcpStream>) -> bool {
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) if line == "\r\n" => return true,
            Ok(_) => {}
        }
    }
}

fn answer(stream: &mut TcpStream) {
    stream
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        .expect("answering");
}

/// A raw server on a thread of its own: answers one request, waits for
/// `close`, then does what `second` says; returns how many connections it
/// accepted in all.
fn serve(
    listener: TcpListener,
    second: Second,
    close: mpsc::Receiver<()>,
    closed: mpsc::Sender<()>,
) -> usize {
    listener.set_nonblocking(false).expect("blocking accept");
    let (first, _) = listener.accept().expect("the first connection");
    first
        .set_read_timeout(Some(PATIENCE))
        .expect("a read timeout");
    let mut reader = BufReader::new(first.try_clone().expect("a clone"));
    assert!(read_head(&mut reader), "the first request");
    answer(&mut first.try_clone().expect("a clone"));
    close.recv().expect("the signal to close");
    let mut accepted = 1;
    match second {
        Second::CloseWhileIdle => {
            drop(reader);
            drop(first);
            closed.send(()).expect("telling the client");
        }
        Second::CloseAfterReading => {
            closed.send(()).expect("telling the client");
            let _ = read_head(&mut reader);
            drop(reader);
            drop(first);
        }
    }
    // Any retry comes on a new connection.
    listener.set_nonblocking(true).expect("nonblocking accept");
    let deadline = std::time::Instant::now() + Duration::from_millis(500);
    while std::time::Instant::now() < deadline {
        match listener.accept() {
            Ok((mut stream, _)) => {
                accepted += 1;
                stream.set_nonblocking(false).expect("blocking");
                stream
                    .set_read_timeout(Some(PATIENCE))
                    .expect("a read timeout");
                let mut reader = BufReader::new(stream.try_clone().expect("a clone"));
                if read_head(&mut reader) {
                    answer(&mut stream);
                }
            }
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
    accepted
}

/// The second request's outcome ("ok" or the error) and the connections the
/// server accepted.
async fn second_request(retry_canceled: Option<bool>, second: Second) -> (String, usize) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding");
    let url = format!("http://{}/", listener.local_addr().expect("an address"));
    let (close_tx, close_rx) = mpsc::channel();
    let (closed_tx, closed_rx) = mpsc::channel();
    let server = thread::spawn(move || serve(listener, second, close_rx, closed_tx));
    let mut builder = Client::builder(TokioExecutor::new());
    if let Some(retry) = retry_canceled {
        builder.retry_canceled_requests(retry);
    }
    let client: Client<HttpConnector, Empty<Bytes>> = builder.build_http();
    let get = || {
        http::Request::get(&url)
            .body(Empty::new())
            .expect("a request")
    };
    let first = client.request(get()).await.expect("the first answer");
    first.into_body().collect().await.expect("the first body");
    // Block this (the runtime's only) thread: the client's connection task
    // cannot run, so it cannot read the FIN the server is about to send.
    close_tx.send(()).expect("asking the server to close");
    closed_rx.recv().expect("the server closed");
    thread::sleep(Duration::from_millis(100));
    // One yield lets the runtime's IO driver take in the FIN: it wakes the
    // connection task, but this task runs first and hands the pool's
    // connection the next request, which the connection task then finds
    // closed before it writes a byte.
    tokio::task::yield_now().await;
    let outcome = match client.request(get()).await {
        Ok(response) => {
            let body = response.into_body().collect().await.expect("the body");
            String::from_utf8_lossy(&body.to_bytes()).into_owned()
        }
        Err(error) => format!("{error:?}"),
    };
    let accepted = tokio::task::spawn_blocking(move || server.join().expect("the server"))
        .await
        .expect("joining");
    (outcome, accepted)
}

#[tokio::test(flavor = "current_thread")]
async fn retry_canceled_requests_resends_only_what_was_never_written() {
    bounded("retry_canceled_requests", BOUND, async {
        // The default: the request the closed connection never wrote goes
        // out again on a new connection, and succeeds.
        let (outcome, accepted) = second_request(None, Second::CloseWhileIdle).await;
        assert_eq!((outcome.as_str(), accepted), ("ok", 2));
        // Off: the same race fails the request.
        let (outcome, accepted) = second_request(Some(false), Second::CloseWhileIdle).await;
        assert!(outcome.contains("anceled"), "{outcome}");
        assert_eq!(accepted, 1);
        // The default again, but the request was written before the close:
        // not resent.
        let (outcome, accepted) = second_request(None, Second::CloseAfterReading).await;
        assert!(
            outcome.contains("IncompleteMessage") || outcome.contains("closed"),
            "{outcome}"
        );
        assert_eq!(accepted, 1);
    })
    .await;
}
