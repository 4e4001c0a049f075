//! `mcp-reference-server [--events] [--legacy | --modern]`: the reference MCP server on
//! 127.0.0.1, port 0 (with `--events`, MCP Events declared and served at 2026-07-28; with
//! `--legacy` or `--modern`, that era alone, else both). Prints its `/mcp` endpoint on
//! one line of stdout, then serves until its stdin closes, taking one command a line:
//!
//! - `touch URI`: once a subscription reaches `URI` (within 10 s), the resource changes;
//!   prints `touched URI`, or `unreached URI` when none did;
//! - `emit NAME JSON`: an MCP Events occurrence of type `NAME` with `JSON` as its payload;
//!   prints its event id.

use std::io::Write;
use std::time::Duration;

use mcp_reference_server::{Options, ReferenceServer};
use tokio::io::{AsyncBufReadExt, BufReader};

/// How long `touch` waits for a subscription to reach the resource.
const REACH_WAIT: Duration = Duration::from_secs(10);

fn say(line: &str) {
    let mut stdout = std::io::stdout().lock();
    // A parent that closed stdout still ends us by closing stdin.
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut options = Options::default();
    let given = |flag: &str| std::env::args().skip(1).any(|a| a == flag);
    options.events = given("--events");
    options.modern = !given("--legacy");
    options.legacy = !given("--modern");
    let server = ReferenceServer::start(options).await;
    say(&server.url());
    // Serve until stdin reaches its end (or fails): never outlive the parent.
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let (command, rest) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
        match command {
            "touch" => touch(&server, rest.trim()).await,
            "emit" => {
                let (name, data) = rest.trim().split_once(' ').unwrap_or((rest.trim(), "null"));
                match serde_json::from_str(data) {
                    Ok(data) => say(&server.emit(name, data)),
                    Err(e) => say(&format!("error: {e}")),
                }
            }
            "" => {}
            other => say(&format!("error: unknown command {other:?}")),
        }
    }
    drop(server);
}

/// Touches `uri` once a subscription reaches it, so the change is not lost to a subscriber
/// still on its way.
async fn touch(server: &ReferenceServer, uri: &str) {
    let reached = tokio::time::timeout(REACH_WAIT, async {
        while server.reaching(uri) + server.listening(uri) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    match reached {
        Ok(()) => {
            server.touch(uri).await;
            say(&format!("touched {uri}"));
        }
        Err(_) => say(&format!("unreached {uri}")),
    }
}
