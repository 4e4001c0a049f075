//! The plain MCP server the roundtrip bench (`benches/roundtrip.rs`) measures against, in a
//! process of its own so that the bench's CPU time is the client's alone.
//!
//! hyper http1 on one thread, bound to 127.0.0.1 port 0; it prints its port on stdout, then
//! answers every POST with JSON (never a stream):
//!
//! - `server/discover`: 2026-07-28, `tools` declared;
//! - `tools/list`: 100 tools, `add` first (name, title, description, an `inputSchema` with a
//!   few properties), in one page;
//! - `tools/call`: the result of `add` (`5`), whatever the arguments;
//! - a notification: 202; any other request: -32601.
//!
//! It exits when its stdin closes (the bench ended, or died).

use std::convert::Infallible;
use std::io::Write;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use mcp_wire::{ErrorObject, Message, code};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::net::TcpListener;

const DISCOVER: &str = r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"private"}"#;

const CALL: &str = r#"{"resultType":"complete","content":[{"type":"text","text":"5"}],"structuredContent":{"result":5},"isError":false}"#;

/// The `tools/list` result: `add`, then 99 tools shaped like a file server's.
fn tools_list() -> Value {
    let mut tools = vec![json!({
        "name": "add",
        "title": "Add",
        "description": "Adds two numbers and returns their sum.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "a": {"type": "number", "description": "The first addend."},
                "b": {"type": "number", "description": "The second addend."}
            },
            "required": ["a", "b"]
        }
    })];
    tools.extend((1..100).map(|i| {
        json!({
            "name": format!("files_{i:03}"),
            "title": format!("Files {i}"),
            "description": format!(
                "Lists the entries of a directory of share {i}, optionally recursively, \
                 up to a limit; each entry has its path, size and modification time."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The directory, relative to the share's root."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
                    "recursive": {"type": "boolean", "default": false},
                    "pattern": {"type": "string", "description": "A glob the names must match."}
                },
                "required": ["path"]
            }
        })
    }));
    json!({"resultType": "complete", "tools": tools})
}

/// The three results, encoded once.
struct Results {
    discover: Box<RawValue>,
    list: Box<RawValue>,
    call: Box<RawValue>,
}

impl Results {
    fn new() -> Self {
        let raw = |s: String| RawValue::from_string(s).expect("the results are JSON");
        Self {
            discover: raw(DISCOVER.to_owned()),
            list: raw(tools_list().to_string()),
            call: raw(CALL.to_owned()),
        }
    }
}

/// The answer to one POSTed message: a status and a JSON body (empty on 202).
fn answer(body: &[u8], results: &Results) -> (u16, Vec<u8>) {
    let request = match mcp_wire::decode(body, usize::MAX) {
        Ok(Message::Request(request)) => request,
        Ok(_) => return (202, Vec::new()),
        Err(_) => {
            let mut out = Vec::new();
            let error = ErrorObject::new(code::PARSE_ERROR, "Parse error");
            mcp_wire::encode_error(&mut out, None, &error).expect("an error object encodes");
            return (400, out);
        }
    };
    let result = match request.method.as_ref() {
        "server/discover" => &results.discover,
        "tools/list" => &results.list,
        "tools/call" => &results.call,
        other => {
            let mut out = Vec::new();
            let error =
                ErrorObject::new(code::METHOD_NOT_FOUND, format!("Method not found: {other}"));
            mcp_wire::encode_error(&mut out, Some(&request.id), &error)
                .expect("an error object encodes");
            return (404, out);
        }
    };
    let mut out = Vec::with_capacity(result.get().len() + 48);
    mcp_wire::encode_result(&mut out, &request.id, result).expect("a raw result encodes");
    (200, out)
}

fn main() {
    // Stdin closed: the bench is gone, and so is the server.
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        std::process::exit(0);
    });
    let results: &'static Results = Box::leak(Box::new(Results::new()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("an address").port();
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{port}").expect("stdout");
        stdout.flush().expect("stdout");
        drop(stdout);
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            tokio::spawn(async move {
                let service = service_fn(|req: http::Request<hyper::body::Incoming>| async move {
                    let body = match req.into_body().collect().await {
                        Ok(body) => body.to_bytes(),
                        Err(_) => Bytes::new(),
                    };
                    let (status, body) = answer(&body, results);
                    let mut response = http::Response::builder().status(status);
                    if !body.is_empty() {
                        response = response.header("content-type", "application/json");
                    }
                    Ok::<_, Infallible>(
                        response
                            .body(Full::new(Bytes::from(body)))
                            .expect("a response"),
                    )
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
}
