//! A small static file server for the built book, on 127.0.0.1 only. It is
//! also what the browser tests open pages from.

use std::{
    fs,
    io::{BufRead, BufReader, Write},
    net::{TcpListener, TcpStream},
    path::{Component, Path, PathBuf},
    thread,
    time::Duration,
};

use anyhow::{Context, Result};

/// Binds 127.0.0.1:`port` (0 picks a free port).
pub fn bind(port: u16) -> Result<TcpListener> {
    TcpListener::bind(("127.0.0.1", port)).with_context(|| format!("binding 127.0.0.1:{port}"))
}

/// Serves files under `root` until the process ends; one thread per connection.
pub fn serve_forever(listener: TcpListener, root: PathBuf) -> Result<()> {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let root = root.clone();
        thread::spawn(move || {
            let _ = answer(stream, &root);
        });
    }
    Ok(())
}

fn answer(stream: TcpStream, root: &Path) -> Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // Headers are read and ignored; the server only answers GET and HEAD.
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" || header == "\n" {
            break;
        }
    }
    let mut words = request_line.split_whitespace();
    let method = words.next().unwrap_or_default();
    let target = words.next().unwrap_or("/");
    let mut stream = stream;
    if method != "GET" && method != "HEAD" {
        return respond(
            &mut stream,
            "405 Method Not Allowed",
            "text/plain",
            b"method not allowed\n",
            method == "HEAD",
        );
    }
    match resolve(root, target) {
        Some(path) => {
            let body = fs::read(&path)?;
            respond(
                &mut stream,
                "200 OK",
                content_type(&path),
                &body,
                method == "HEAD",
            )
        }
        None => {
            let body = fs::read(root.join("404.html")).unwrap_or_else(|_| b"not found\n".to_vec());
            respond(
                &mut stream,
                "404 Not Found",
                "text/html; charset=utf-8",
                &body,
                method == "HEAD",
            )
        }
    }
}

fn respond(
    stream: &mut TcpStream,
    status: &str,
    kind: &str,
    body: &[u8],
    head_only: bool,
) -> Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    if !head_only {
        stream.write_all(body)?;
    }
    stream.flush()?;
    Ok(())
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

    #[test]
    fn stays_inside_the_root_and_serves_files() {
        let root = std::env::temp_dir().join(format!("xtask-serve-{}", std::process::id()));
        fs::create_dir_all(root.join("a")).unwrap();
        fs::write(root.join("index.html"), "home").unwrap();
        fs::write(root.join("a/b c.svg"), "<svg/>").unwrap();
        assert_eq!(resolve(&root, "/"), Some(root.join("index.html")));
        assert_eq!(
            resolve(&root, "/a/b%20c.svg?x=1"),
            Some(root.join("a/b c.svg"))
        );
        assert_eq!(resolve(&root, "/../etc/passwd"), None);
        assert_eq!(resolve(&root, "/missing"), None);

        let listener = bind(0).unwrap();
        let port = listener.local_addr().unwrap().port();
        let served_root = root.clone();
        thread::spawn(move || serve_forever(listener, served_root));
        let mut client = TcpStream::connect(("127.0.0.1", port)).unwrap();
        client
            .write_all(b"GET /a/b%20c.svg HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        std::io::Read::read_to_string(&mut client, &mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(
            answer.contains("image/svg+xml") && answer.ends_with("<svg/>"),
            "{answer}"
        );
        fs::remove_dir_all(root).unwrap();
    }
}
