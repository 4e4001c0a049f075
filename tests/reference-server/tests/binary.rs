//! The `mcp-reference-server` binary: one line with its endpoint on stdout, a server that
//! answers there, and an exit once its stdin closes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

#[test]
fn prints_its_endpoint_serves_and_stops_when_stdin_closes() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-reference-server"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("a line");
    let addr = line
        .trim_end()
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("not an endpoint: {line:?}"));
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");

    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let mut stream = TcpStream::connect(addr).expect("it listens");
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("a request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    assert!(
        answer.contains(r#""serverInfo":{"name":"mcp-reference-server""#),
        "{answer}"
    );

    drop(child.stdin.take());
    let (done, exited) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait());
    });
    let status = exited
        .recv_timeout(Duration::from_secs(10))
        .expect("it exits once stdin closes")
        .expect("a status");
    assert!(status.success(), "{status:?}");
}
