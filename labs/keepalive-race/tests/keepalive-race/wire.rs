//! The raw HTTP/1.1 client the lab reads sockets with: `Keep-Alive` hints,
//! and responses framed both ways, back to back on one connection.

use std::time::Duration;

use lab_keepalive_race::wire::{Wire, WireError, keep_alive_timeout};
use tokio::io::AsyncWriteExt;

#[test]
fn reads_keep_alive_hints() {
    assert_eq!(keep_alive_timeout("timeout=5"), Some(5.0));
    assert_eq!(keep_alive_timeout("max=100, timeout=65"), Some(65.0));
    assert_eq!(keep_alive_timeout("max=100"), None);
}

#[tokio::test]
async fn reads_chunked_and_length_framed_responses_back_to_back() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        socket
            .write_all(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n\
                  HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno",
            )
            .await
            .unwrap();
    });
    let mut wire = Wire::connect(addr, Duration::from_secs(2)).await.unwrap();
    let first = wire.read_response("GET").await.unwrap();
    assert_eq!((first.status, first.body.as_slice()), (200, &b"abcde"[..]));
    assert!(!first.close);
    let second = wire.read_response("GET").await.unwrap();
    assert_eq!((second.status, second.body.as_slice()), (404, &b"no"[..]));
    assert!(second.close);
    server.await.unwrap();
    assert!(matches!(
        wire.read_response("GET").await,
        Err(WireError::Closed { partial: 0 })
    ));
}

/// An HTTP/1.0 answer keeps its connection only with `Connection:
/// keep-alive` (Python's `http.server` answers HTTP/1.0 without it).
#[tokio::test]
async fn an_http10_answer_closes_unless_it_says_keep_alive() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        socket
            .write_all(
                b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok\
                  HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
            )
            .await
            .unwrap();
    });
    let mut wire = Wire::connect(addr, Duration::from_secs(2)).await.unwrap();
    assert!(!wire.read_response("GET").await.unwrap().close);
    assert!(wire.read_response("GET").await.unwrap().close);
    server.await.unwrap();
}
