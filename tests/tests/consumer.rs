//! A program outside the workspace that takes `mcp-negotiate` alone (`tests/consumer`)
//! connects with its own `clientInfo` to the reference server and to the Python SDK's server,
//! lists their tools and calls one; its README shows exactly the code it runs.
//!
//! `scripts/test` builds it first: `cargo build --manifest-path tests/consumer/Cargo.toml
//! --locked --target-dir target`.

use std::path::PathBuf;
use std::process::{Command, Output};

use agentd_tests::peers;
use mcp_reference_server::{Options, ReferenceServer};

fn consumer_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("consumer")
}

/// The consumer's binary, built by the test command; its absence fails the test, naming the
/// command that builds it.
fn consumer() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    );
    let exe = target.join("debug").join("mcp-consumer");
    assert!(
        exe.is_file(),
        "{} is missing: build it with `cargo build --manifest-path tests/consumer/Cargo.toml \
         --locked --target-dir target` (scripts/test does)",
        exe.display()
    );
    exe
}

/// Runs the consumer against `url` on a thread of its own, so the server's runtime goes on.
async fn run(url: String) -> Output {
    let exe = consumer();
    tokio::task::spawn_blocking(move || Command::new(exe).arg(url).output().unwrap())
        .await
        .unwrap()
}

fn said(output: &Output) -> String {
    assert!(
        output.status.success(),
        "the consumer failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn the_readme_shows_the_code_the_consumer_runs() {
    let readme = std::fs::read_to_string(consumer_dir().join("README.md")).unwrap();
    let main = std::fs::read_to_string(consumer_dir().join("src/main.rs")).unwrap();
    let block = readme
        .split("```rust,ignore\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a rust block in the README");
    assert_eq!(block, main);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consumer_reaches_the_reference_server_with_its_own_client_info() {
    let server = ReferenceServer::start(Options::default()).await;
    let out = said(&run(server.url()).await);
    assert!(out.contains("connected at 2026-07-28"), "{out}");
    assert!(out.contains("tool add"), "{out}");
    assert!(out.contains("add(2, 3) = 5"), "{out}");
    let log = server.log();
    let info = &log[0].body["params"]["_meta"]["io.modelcontextprotocol/clientInfo"];
    assert_eq!(info["name"], "mcp-consumer");
    assert_eq!(info["title"], "A consumer of mcp-negotiate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consumer_reaches_the_python_sdk_server() {
    let peer = peers::python(true);
    let out = said(&run(peer.url.clone()).await);
    assert!(
        out.contains("connected at 2026-07-28"),
        "{out}\n{}",
        peer.output_tail()
    );
    assert!(out.contains("tool add"), "{out}");
    assert!(out.contains("add(2, 3) = 5"), "{out}");
}
