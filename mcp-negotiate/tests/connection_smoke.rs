//! The revision-neutral connection reaches the reference server in each era and calls a tool.

use std::time::Duration;

use mcp_negotiate::Client;
use mcp_reference_server::support::bounded;
use mcp_reference_server::{Fault, Options, ReferenceServer, Times};
use mcp_wire::{Meta, Revision};
use serde_json::json;

async fn connect(server: &ReferenceServer) -> Client {
    Client::builder("my-app", "1.0.0")
        .connect(&server.url())
        .await
        .expect("connected")
}

#[tokio::test]
async fn both_eras_list_and_call() {
    for legacy in [false, true] {
        let server = ReferenceServer::start(Options::default()).await;
        if legacy {
            server.script("server/discover", Fault::Status(404, None), Times::Once);
        }
        let connection = connect(&server).await;
        let expected = if legacy {
            Revision::V2025_11_25
        } else {
            Revision::V2026_07_28
        };
        assert_eq!(connection.revision(), expected);
        let catalog = connection.catalog();
        let names: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["add", "slow", "ask", "region", "fail"]);
        let result = connection
            .call_tool("add", json!({"a": 2, "b": 3}))
            .await
            .unwrap();
        assert_eq!(result.content[0].as_text(), Some("5"));
        let mut meta = Meta::new();
        meta.insert("example.com/run".into(), "run-1".into());
        let args = json!({"region": "Zürich"}).as_object().cloned();
        let routed = connection
            .call_tool_with("region", args, Some(&meta), |_| {})
            .await
            .unwrap();
        assert_eq!(routed.content[0].as_text(), Some("Zürich"));
        let failed = connection.call_tool("fail", json!(null)).await.unwrap();
        assert!(failed.is_error());
        let log = server.log();
        let call = |name: &str| {
            log.iter()
                .find(|l| l.body["params"]["name"] == name)
                .unwrap()
        };
        assert_eq!(
            call("region").body["params"]["_meta"]["example.com/run"],
            "run-1"
        );
        assert_eq!(
            call("add").body["params"]["_meta"].get("example.com/run"),
            None
        );
        assert_eq!(
            connection.call_tool("add", json!([1, 2])).await,
            Err(mcp_negotiate::Error::Arguments)
        );
    }
}

/// Cancelling a call: a legacy server is sent `notifications/cancelled` with the call's id; a
/// modern one sees the stream close. Either way the caller gets `Cancelled`, not the result
/// the call would have had. The call is cancelled once its first progress came, in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_says_so_in_each_era() {
    for legacy in [false, true] {
        let server = ReferenceServer::start(Options::default()).await;
        if legacy {
            server.script("server/discover", Fault::Status(404, None), Times::Once);
        }
        let connection = connect(&server).await;
        let args = json!({"steps": 40, "delay_ms": 50}).as_object().cloned();
        let (progressed, cancel) = tokio::sync::oneshot::channel();
        let mut progressed = Some(progressed);
        let mut steps = 0;
        let on_notice = |notice: mcp_transport::driver::Notice| {
            if notice.method == "notifications/progress" {
                steps += 1;
                if let Some(progressed) = progressed.take() {
                    let _ = progressed.send(());
                }
            }
        };
        let outcome = connection
            .call_tool_until("slow", args, None, on_notice, async {
                let _ = cancel.await;
            })
            .await;
        assert_eq!(
            outcome,
            Err(mcp_negotiate::Error::Cancelled),
            "legacy {legacy}"
        );
        assert!(
            (1..40).contains(&steps),
            "legacy {legacy}: cancelled in flight, after {steps} of 40 steps"
        );
        let log = server.log();
        let call = log
            .iter()
            .find(|l| l.body["params"]["name"] == "slow")
            .unwrap();
        let told = |log: &[mcp_reference_server::Logged]| {
            log.iter()
                .find(|l| l.method.as_deref() == Some("notifications/cancelled"))
                .cloned()
        };
        match legacy {
            // Sent on a task of its own: waited for, within a bound.
            true => {
                let cancelled = bounded("notifications/cancelled", async {
                    loop {
                        if let Some(cancelled) = told(&server.log()) {
                            return cancelled;
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                })
                .await;
                assert_eq!(cancelled.body["params"]["requestId"], call.body["id"]);
            }
            false => assert!(
                told(&log).is_none(),
                "a modern call is cancelled by closing its stream"
            ),
        }
    }
}

/// Closing a legacy connection ends its session with DELETE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_legacy_connection_deletes_its_session() {
    let server = ReferenceServer::start(Options::default()).await;
    server.script("server/discover", Fault::Status(404, None), Times::Once);
    let connection = connect(&server).await;
    connection.close().await.unwrap();
    let log = server.log();
    let delete = log
        .iter()
        .find(|l| l.http == http::Method::DELETE)
        .expect("a DELETE");
    assert!(delete.header("mcp-session-id").is_some());
}
