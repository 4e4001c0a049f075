//! Smoke tests for the peer launcher (`agentd_tests::peers`): start each real peer and do
//! one hand-written HTTP/1.1 `initialize` round trip against it.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use agentd_tests::peers::{self, Peer};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"agentd-peers-smoke","version":"0.1.0"}}}"#;

/// A parsed HTTP/1.1 response: status code, head and the (de-chunked) body.
#[derive(Debug)]
struct Response {
    status: u16,
    head: String,
    body: String,
}

/// POSTs `initialize` to the peer and reads one complete response.
///
/// SSE answers keep `Client: keep-alive` even when the request says `close` (the
/// everything peer then holds the socket for its keep-alive timeout), so the response ends
/// where its framing (`Content-Length` or the last chunk) says, not at EOF.
fn post_initialize(peer: &Peer) -> Response {
    let rest = peer
        .url
        .strip_prefix("http://")
        .expect("peer url is http://");
    let (authority, path) = rest.split_at(rest.find('/').expect("peer url has a path"));
    let mut stream = TcpStream::connect(authority).expect("connect to the peer");
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("set read timeout");
    let request = format!(
        "POST {path} HTTP/1.1\r\n\
         Host: {authority}\r\n\
         Accept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\n\
         Content-Length: {}\r\n\
         Client: close\r\n\
         \r\n\
         {INITIALIZE}",
        INITIALIZE.len()
    );
    stream
        .write_all(request.as_bytes())
        .expect("send the request");
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(response) = parse_response(&raw, false) {
            return response;
        }
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!(
                    "no complete response within 15 s; got:\n{}\n--- peer output ---\n{}",
                    String::from_utf8_lossy(&raw),
                    peer.output_tail()
                )
            }
            Err(e) => panic!("reading the response failed: {e}"),
        }
    }
    parse_response(&raw, true).unwrap_or_else(|| {
        panic!(
            "connection closed mid-response:\n{}",
            String::from_utf8_lossy(&raw)
        )
    })
}

/// Parses `raw` if it holds a complete response (`eof`: the peer closed the connection).
fn parse_response(raw: &[u8], eof: bool) -> Option<Response> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let rest = &raw[split + 4..];
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let header = |name: &str| {
        head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_ascii_lowercase())
        })
    };
    let body = if header("transfer-encoding").is_some_and(|te| te.contains("chunked")) {
        dechunk(rest)?
    } else if let Some(len) = header("content-length") {
        let len: usize = len.parse().ok()?;
        rest.get(..len)?.to_vec()
    } else if eof {
        rest.to_vec()
    } else {
        return None;
    };
    let body = String::from_utf8_lossy(&body).into_owned();
    Some(Response { status, head, body })
}

/// Decodes a chunked body, or `None` while the last (zero-size) chunk has not arrived.
fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
        let size_field = std::str::from_utf8(&rest[..line_end]).ok()?;
        let size_hex = size_field.split(';').next()?.trim();
        let size = usize::from_str_radix(size_hex, 16).ok()?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

fn assert_initialized(peer: &Peer) {
    assert!(
        peer.url.starts_with("http://127.0.0.1:") && peer.url.ends_with("/mcp"),
        "unexpected peer url {}",
        peer.url
    );
    let response = post_initialize(peer);
    assert_eq!(
        response.status,
        200,
        "{}\n\n{}\n--- peer output ---\n{}",
        response.head,
        response.body,
        peer.output_tail()
    );
    assert!(
        response.body.contains("\"protocolVersion\""),
        "no protocolVersion in the body:\n{}\n\n{}",
        response.head,
        response.body
    );
}

#[test]
fn python_peer_answers_initialize() {
    assert_initialized(&peers::python(false));
    assert_initialized(&peers::python(true));
    assert_initialized(&peers::python_stateless(false));
}

#[test]
fn everything_peer_answers_initialize() {
    assert_initialized(&peers::everything());
}
