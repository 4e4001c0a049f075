//! `mcp-reference-server`: the reference MCP server with default options on 127.0.0.1, port
//! 0. Prints its `/mcp` endpoint on one line of stdout, then serves until its stdin closes.

use std::io::Write;

use mcp_reference_server::{Options, ReferenceServer};
use tokio::io::AsyncReadExt;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = ReferenceServer::start(Options::default()).await;
    {
        let mut stdout = std::io::stdout().lock();
        // A parent that closed stdout still ends us by closing stdin.
        let _ = writeln!(stdout, "{}", server.url());
        let _ = stdout.flush();
    }
    // Serve until stdin reaches its end (or fails): never outlive the parent.
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 256];
    while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
    drop(server);
}
