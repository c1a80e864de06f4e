//! Answering a request from the files under the root: the path resolved
//! inside the root (never outside it), the file's content type, and the whole
//! response in one buffer.

use std::{
    fs,
    path::{Component, Path, PathBuf},
};

use super::request::Request;

/// The whole response to `request`: head and body in one buffer.
pub(super) fn answer(request: &Request, root: &Path, keep_alive: bool) -> Vec<u8> {
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

pub(super) fn response(
    status: &str,
    kind: &str,
    body: &[u8],
    head_only: bool,
    keep_alive: bool,
) -> Vec<u8> {
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
pub(super) fn resolve(root: &Path, target: &str) -> Option<PathBuf> {
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
