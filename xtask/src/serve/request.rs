//! Reading a request head: the request line and the headers a static file
//! server needs (whether the connection stays open, whether a body follows).

use std::io::{self, BufRead, ErrorKind, Read};

/// The longest request head (request line and headers) the server reads.
pub(super) const MAX_HEAD_BYTES: usize = 16 * 1024;

/// One request, as far as a static file server needs it.
#[derive(Debug)]
pub(super) struct Request {
    pub(super) method: String,
    pub(super) target: String,
    /// Whether the client may send another request on this connection.
    pub(super) keep_alive: bool,
    /// A request body (the server answers GET and HEAD only) would have to
    /// be skipped to find the next request; such a connection is closed.
    pub(super) has_body: bool,
}

/// Reads one request head. `Ok(None)`: the connection ended before a request
/// began. `InvalidData`: a head the server cannot read.
pub(super) fn read_request(reader: &mut impl BufRead) -> io::Result<Option<Request>> {
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
