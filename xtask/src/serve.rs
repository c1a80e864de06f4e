//! A small static file server for the built book, on 127.0.0.1 only. It is
//! also what the browser tests open pages from.
//!
//! A browser opens several connections at once and keeps them alive between
//! requests, so the server gives every connection its own thread, answers
//! any number of requests on one connection, writes each response whole
//! (head and body in one buffer, `write_all` through partial writes), and
//! closes a connection only in a way that cannot destroy a response still in
//! flight (see `close_gently`).

use std::{
    fs,
    io::{self, BufRead, BufReader, ErrorKind, Read, Write},
    net::{Shutdown, TcpListener, TcpStream},
    path::{Component, Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

/// How long a kept-alive connection may wait for its next request before the
/// server closes it. Browsers close idle connections sooner themselves.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest request head (request line and headers) the server reads.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// How long a closing connection keeps reading what the client still sends.
const LINGER: Duration = Duration::from_secs(2);

/// Binds 127.0.0.1:`port` (0 picks a free port).
pub fn bind(port: u16) -> Result<TcpListener> {
    TcpListener::bind(("127.0.0.1", port)).with_context(|| format!("binding 127.0.0.1:{port}"))
}

/// Serves files under `root` until the process ends; one thread per connection.
pub fn serve_forever(listener: TcpListener, root: PathBuf) -> Result<()> {
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(stream) => stream,
            // A connection the client gave up on before it was accepted.
            Err(error) if error.kind() == ErrorKind::ConnectionAborted => continue,
            // Out of file descriptors or memory: wait for connections to
            // close rather than spin on an accept that keeps failing.
            Err(_) => {
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let root = root.clone();
        // If no thread can be started, the connection is dropped (the client
        // sees it closed and may retry) and the server keeps accepting.
        let _ = thread::Builder::new()
            .name("serve-connection".into())
            .spawn(move || {
                let _ = serve_connection(stream, &root);
            });
    }
    Ok(())
}

/// One request, as far as a static file server needs it.
#[derive(Debug)]
struct Request {
    method: String,
    target: String,
    /// Whether the client may send another request on this connection.
    keep_alive: bool,
    /// A request body (the server answers GET and HEAD only) would have to
    /// be skipped to find the next request; such a connection is closed.
    has_body: bool,
}

/// Answers requests on one connection until the client closes it, asks to
/// close it, or stays idle past `IDLE_TIMEOUT`.
fn serve_connection(stream: TcpStream, root: &Path) -> io::Result<()> {
    stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
    // Each response goes out in one write; do not hold its last segment back.
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let request = match read_request(&mut reader) {
            Ok(Some(request)) => request,
            // The client closed the connection between requests.
            Ok(None) => return Ok(()),
            Err(error) if error.kind() == ErrorKind::InvalidData => {
                let response = response(
                    "400 Bad Request",
                    "text/plain; charset=utf-8",
                    b"bad request\n",
                    false,
                    false,
                );
                writer.write_all(&response)?;
                break;
            }
            // Idle past the timeout, or the connection failed.
            Err(error) => return Err(error),
        };
        let keep_alive = request.keep_alive && !request.has_body;
        writer.write_all(&answer(&request, root, keep_alive))?;
        if !keep_alive {
            break;
        }
    }
    close_gently(writer, reader);
    Ok(())
}

/// Closing a socket that still holds unread bytes from the client makes the
/// kernel send a reset, and a reset can make the client discard the end of a
/// response it has not read yet. So the server first says it will send no
/// more (a FIN after the response), then reads and drops whatever the client
/// still sends, until the client closes its side or `LINGER` passes.
fn close_gently(writer: TcpStream, mut reader: BufReader<TcpStream>) {
    if writer.shutdown(Shutdown::Write).is_err() {
        return;
    }
    let deadline = Instant::now() + LINGER;
    let mut sink = [0u8; 4096];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        if left.is_zero() || writer.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match reader.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

/// Reads one request head. `Ok(None)`: the connection ended before a request
/// began. `InvalidData`: a head the server cannot read.
fn read_request(reader: &mut impl BufRead) -> io::Result<Option<Request>> {
    let mut budget = MAX_HEAD_BYTES;
    let mut request_line = read_head_line(reader, &mut budget)?;
    // A blank line before a request line is allowed (RFC 9112, 2.2).
    if request_line.as_deref() == Some("") {
        request_line = read_head_line(reader, &mut budget)?;
    }
    let Some(request_line) = request_line else {
        return Ok(None);
    };
    let invalid = |what: &str| io::Error::new(ErrorKind::InvalidData, what.to_string());
    let mut words = request_line.split_whitespace();
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(invalid("malformed request line"));
    };
    let http_11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(invalid("unsupported HTTP version")),
    };
    let mut connection = String::new();
    let mut has_body = false;
    loop {
        let line = read_head_line(reader, &mut budget)?
            .ok_or_else(|| invalid("connection closed inside a request head"))?;
        if line.is_empty() {
            break;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| invalid("malformed header"))?;
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "connection" => {
                connection.push(',');
                connection.push_str(&value.to_ascii_lowercase());
            }
            "content-length" => has_body |= value != "0",
            "transfer-encoding" => has_body = true,
            _ => {}
        }
    }
    let tokens: Vec<&str> = connection.split(',').map(str::trim).collect();
    let keep_alive = if http_11 {
        !tokens.contains(&"close")
    } else {
        tokens.contains(&"keep-alive")
    };
    Ok(Some(Request {
        method: method.to_string(),
        target: target.to_string(),
        keep_alive,
        has_body,
    }))
}

/// One line of a request head without its line ending; `None` at the end of
/// the stream before any byte of the line.
fn read_head_line(reader: &mut impl BufRead, budget: &mut usize) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    let read = reader
        .take(*budget as u64 + 1)
        .read_until(b'\n', &mut line)?;
    if read == 0 {
        return Ok(None);
    }
    if read > *budget || line.last() != Some(&b'\n') {
        return Err(io::Error::new(
            ErrorKind::InvalidData,
            "request head too long or cut short",
        ));
    }
    *budget -= read;
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line)
        .map(Some)
        .map_err(|_| io::Error::new(ErrorKind::InvalidData, "request head is not UTF-8"))
}

/// The whole response to `request`: head and body in one buffer.
fn answer(request: &Request, root: &Path, keep_alive: bool) -> Vec<u8> {
    let head_only = request.method == "HEAD";
    if request.method != "GET" && !head_only {
        return response(
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            b"method not allowed\n",
            false,
            keep_alive,
        );
    }
    if let Some(path) = resolve(root, &request.target)
        && let Ok(body) = fs::read(&path)
    {
        return response("200 OK", content_type(&path), &body, head_only, keep_alive);
    }
    let body = fs::read(root.join("404.html")).unwrap_or_else(|_| b"not found\n".to_vec());
    response(
        "404 Not Found",
        "text/html; charset=utf-8",
        &body,
        head_only,
        keep_alive,
    )
}

fn response(status: &str, kind: &str, body: &[u8], head_only: bool, keep_alive: bool) -> Vec<u8> {
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let mut bytes = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Cache-Control: no-cache\r\nConnection: {connection}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        bytes.extend_from_slice(body);
    }
    bytes
}

/// The file a request path names, if it is inside `root`.
fn resolve(root: &Path, target: &str) -> Option<PathBuf> {
    let path = target.split(['?', '#']).next().unwrap_or("/");
    let decoded = percent_decode(path)?;
    let mut resolved = root.to_path_buf();
    for component in Path::new(decoded.trim_start_matches('/')).components() {
        match component {
            Component::Normal(part) => resolved.push(part),
            Component::CurDir => {}
            // No way out of the root.
            _ => return None,
        }
    }
    if resolved.is_dir() {
        resolved.push("index.html");
    }
    resolved.is_file().then_some(resolved)
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = text.get(index + 1..index + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn content_type(path: &Path) -> &'static str {
    match path
        .extension()
        .and_then(|extension| extension.to_str())
        .unwrap_or_default()
    {
        "html" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "json" => "application/json",
        "jsonl" => "text/plain; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "wasm" => "application/wasm",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "txt" | "md" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A served root with a small page and a large file, and the server's port.
    struct Fixture {
        root: PathBuf,
        port: u16,
        big: Vec<u8>,
    }

    impl Fixture {
        fn start(name: &str) -> Fixture {
            let root =
                std::env::temp_dir().join(format!("xtask-serve-{name}-{}", std::process::id()));
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
        let mut client = fixture.connect();
        let mut reader = BufReader::new(client.try_clone().unwrap());
        client
            .write_all(b"GET /a/b%20c.svg HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
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
        let (head, body) = read_response(&mut reader);
        assert!(head.contains("Connection: close"), "{head}");
        assert_eq!(body, b"home");
        assert_closed(&mut reader);
    }

    #[test]
    fn answers_pipelined_requests_in_order() {
        let fixture = Fixture::start("pipelined");
        let mut client = fixture.connect();
        let mut reader = BufReader::new(client.try_clone().unwrap());
        client
            .write_all(
                b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /a/b%20c.svg HTTP/1.1\r\nHost: x\r\n\r\n\
                  GET / HTTP/1.0\r\n\r\n",
            )
            .unwrap();
        assert_eq!(read_response(&mut reader).1, b"home");
        assert_eq!(read_response(&mut reader).1, b"<svg/>");
        // HTTP/1.0 without keep-alive: the answer, then the end of the stream.
        let (head, body) = read_response(&mut reader);
        assert!(head.contains("Connection: close"), "{head}");
        assert_eq!(body, b"home");
        assert_closed(&mut reader);
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
        let mut client = fixture.connect();
        let mut reader = BufReader::new(client.try_clone().unwrap());
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        assert_eq!(read_response(&mut reader).1, b"home");
        // The first connection is still being served: it finishes its request.
        half.write_all(b" x\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut BufReader::new(half)).1, b"home");
    }

    #[test]
    fn a_large_file_arrives_whole_to_a_slow_reader() {
        let fixture = Fixture::start("large");
        let mut client = fixture.connect();
        client
            .write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
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
        let mut client = fixture.connect();
        let mut reader = BufReader::new(client.try_clone().unwrap());
        client
            .write_all(
                b"HEAD /big.bin HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
            )
            .unwrap();
        let mut head = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
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
        let mut client = fixture.connect();
        client
            .write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
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
        for request in [
            &b"NONSENSE\r\n\r\n"[..],
            b"GET / HTTP/2.0\r\n\r\n",
            &[
                b"GET /".as_slice(),
                &[b'a'; MAX_HEAD_BYTES],
                b" HTTP/1.1\r\n\r\n",
            ]
            .concat(),
        ] {
            let mut client = fixture.connect();
            client.write_all(request).unwrap();
            let mut reader = BufReader::new(client);
            let (head, _) = read_response(&mut reader);
            assert!(head.starts_with("HTTP/1.1 400"), "{head}");
            assert_closed(&mut reader);
        }
        let mut client = fixture.connect();
        client
            .write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
            .unwrap();
        let mut reader = BufReader::new(client);
        let (head, _) = read_response(&mut reader);
        assert!(head.starts_with("HTTP/1.1 405"), "{head}");
        assert!(head.contains("Connection: close"), "{head}");
        assert_closed(&mut reader);
    }
}
