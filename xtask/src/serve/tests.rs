//! The server over real sockets on 127.0.0.1: keep-alive, pipelining,
//! concurrent connections, large files to slow readers, gentle closes, and
//! requests it refuses.

use std::{
    fs,
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    path::PathBuf,
    thread,
    time::Duration,
};

use super::{bind, files::resolve, request::MAX_HEAD_BYTES, serve_forever};

/// A served root with a small page and a large file, and the server's port.
struct Fixture {
    root: PathBuf,
    port: u16,
    big: Vec<u8>,
}

impl Fixture {
    fn start(name: &str) -> Fixture {
        let root = std::env::temp_dir().join(format!("xtask-serve-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("a")).unwrap();
        fs::write(root.join("index.html"), "home").unwrap();
        fs::write(root.join("a/b c.svg"), "<svg/>").unwrap();
        // Large enough that the kernel's socket buffers cannot hold it
        // all, so the server goes through partial writes.
        let big: Vec<u8> = (0..8 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        fs::write(root.join("big.bin"), &big).unwrap();
        let listener = bind(0).unwrap();
        let port = listener.local_addr().unwrap().port();
        let served_root = root.clone();
        thread::spawn(move || serve_forever(listener, served_root));
        Fixture { root, port, big }
    }

    /// A new connection that has sent `request`, and a reader of its answers.
    fn send(&self, request: &[u8]) -> (TcpStream, BufReader<TcpStream>) {
        let mut client = self.connect();
        client.write_all(request).unwrap();
        let reader = BufReader::new(client.try_clone().unwrap());
        (client, reader)
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        // A server that cannot answer fails the test instead of hanging it.
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// One response read by its Content-Length: (head, body).
fn read_response(reader: &mut impl BufRead) -> (String, Vec<u8>) {
    let head = read_head(reader);
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("Content-Length: "))
        .expect("a Content-Length header")
        .parse()
        .unwrap();
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    (head, body)
}

/// A response's status line and headers, up to the blank line.
fn read_head(reader: &mut impl BufRead) -> String {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "connection closed inside a response head: {head}"
        );
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    head
}

/// The last answer on a connection: `body`, said to close, then the end of the stream.
fn assert_last_answer(reader: &mut impl BufRead, body: &[u8]) {
    let (head, received) = read_response(reader);
    assert!(head.contains("Connection: close"), "{head}");
    assert_eq!(received, body);
    assert_closed(reader);
}

fn assert_closed(reader: &mut impl Read) {
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "bytes after the last response: {rest:?}");
}

#[test]
fn stays_inside_the_root() {
    let fixture = Fixture::start("root");
    let root = &fixture.root;
    assert_eq!(resolve(root, "/"), Some(root.join("index.html")));
    assert_eq!(
        resolve(root, "/a/b%20c.svg?x=1"),
        Some(root.join("a/b c.svg"))
    );
    assert_eq!(resolve(root, "/../etc/passwd"), None);
    assert_eq!(resolve(root, "/missing"), None);
}

#[test]
fn keeps_a_connection_alive_until_the_client_asks_to_close() {
    let fixture = Fixture::start("keepalive");
    let (mut client, mut reader) = fixture.send(b"GET /a/b%20c.svg HTTP/1.1\r\nHost: x\r\n\r\n");
    let (head, body) = read_response(&mut reader);
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("Content-Type: image/svg+xml"), "{head}");
    assert!(head.contains("Connection: keep-alive"), "{head}");
    assert_eq!(body, b"<svg/>");
    // The same connection answers again, and a missing file is a 404
    // that keeps the connection too.
    client
        .write_all(b"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (head, _) = read_response(&mut reader);
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_last_answer(&mut reader, b"home");
}

#[test]
fn answers_pipelined_requests_in_order() {
    let fixture = Fixture::start("pipelined");
    let (_client, mut reader) = fixture.send(
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /a/b%20c.svg HTTP/1.1\r\nHost: x\r\n\r\n\
              GET / HTTP/1.0\r\n\r\n",
    );
    assert_eq!(read_response(&mut reader).1, b"home");
    assert_eq!(read_response(&mut reader).1, b"<svg/>");
    // HTTP/1.0 without keep-alive: the answer, then the end of the stream.
    assert_last_answer(&mut reader, b"home");
}

#[test]
fn an_idle_connection_does_not_hold_up_another() {
    let fixture = Fixture::start("concurrent");
    // One connection that sends half a request and waits, one that sends
    // nothing: a server that served one connection at a time would never
    // reach the third before the idle timeout (60 s), and the third
    // client's 20 s read timeout would fail the test.
    let mut half = fixture.connect();
    half.write_all(b"GET / HTTP/1.1\r\nHost:").unwrap();
    let _silent = fixture.connect();
    let (_client, mut reader) = fixture.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(read_response(&mut reader).1, b"home");
    // The first connection is still being served: it finishes its request.
    half.write_all(b" x\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut BufReader::new(half)).1, b"home");
}

#[test]
fn a_large_file_arrives_whole_to_a_slow_reader() {
    let fixture = Fixture::start("large");
    let (client, _) = fixture.send(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n");
    // Let the server fill the socket buffers and block in a partial write.
    thread::sleep(Duration::from_millis(300));
    let mut reader = BufReader::with_capacity(1024, client);
    let (head, body) = read_response(&mut reader);
    assert!(
        head.contains("Content-Type: application/octet-stream"),
        "{head}"
    );
    assert!(body == fixture.big, "the large file arrived changed");
}

#[test]
fn head_sends_the_length_and_no_body() {
    let fixture = Fixture::start("head");
    let (_client, mut reader) =
        fixture.send(b"HEAD /big.bin HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
    let head = read_head(&mut reader);
    let length = fixture.big.len();
    assert!(
        head.contains(&format!("Content-Length: {length}")),
        "{head}"
    );
    // No body bytes came between the HEAD answer and the next answer.
    assert_eq!(read_response(&mut reader).1, b"home");
}

#[test]
fn a_response_survives_bytes_the_client_sends_after_asking_to_close() {
    let fixture = Fixture::start("linger");
    let (mut client, _) =
        fixture.send(b"GET /big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    // Bytes that arrive after the server read the request: if it closed
    // its socket with them unread, the kernel would reset the connection
    // and the client could lose the end of the 8 MiB response.
    thread::sleep(Duration::from_millis(200));
    client
        .write_all(b"late bytes the server never reads\r\n")
        .unwrap();
    thread::sleep(Duration::from_millis(300));
    let mut reader = BufReader::new(client);
    let (_, body) = read_response(&mut reader);
    assert!(body == fixture.big, "the large file arrived changed");
    assert_closed(&mut reader);
}

#[test]
fn refuses_what_it_cannot_read() {
    let fixture = Fixture::start("bad");
    let too_long = [
        b"GET /".as_slice(),
        &[b'a'; MAX_HEAD_BYTES],
        b" HTTP/1.1\r\n\r\n",
    ]
    .concat();
    // Each is answered with its status, and the connection closed after it.
    for (request, status) in [
        (&b"NONSENSE\r\n\r\n"[..], "400"),
        (b"GET / HTTP/2.0\r\n\r\n", "400"),
        (&too_long, "400"),
        // A body the server would have to skip to find the next request.
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
            "405",
        ),
    ] {
        let mut client = fixture.connect();
        client.write_all(request).unwrap();
        let mut reader = BufReader::new(client);
        let (head, _) = read_response(&mut reader);
        assert!(head.starts_with(&format!("HTTP/1.1 {status}")), "{head}");
        assert!(head.contains("Connection: close"), "{head}");
        assert_closed(&mut reader);
    }
}
