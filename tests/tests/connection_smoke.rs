//! The revision-neutral connection reaches the reference server in each era and calls a tool.

use agentd_tests::reference::{Fault, Options, ReferenceServer, Times};
use mcp_negotiate::{Connection, Dialer, Kind};
use mcp_transport::driver::Config;
use mcp_wire::{AgentMeta, Revision};
use serde_json::json;

async fn connect(server: &ReferenceServer) -> Connection {
    let kind = Kind::Supervisor {
        instance: "my-agent".into(),
    };
    let dialer = Dialer::new(&server.url(), Config::default(), kind).unwrap();
    Connection::connect(dialer).await.expect("connected")
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
        let agent = AgentMeta::new("run-1", "my-agent");
        let args = json!({"a": 2, "b": 3}).as_object().cloned();
        let result = connection
            .call_tool("add", args, Some(&agent), |_| {})
            .await
            .unwrap();
        assert_eq!(result.content[0].as_text(), Some("5"));
        let args = json!({"region": "Zürich"}).as_object().cloned();
        let routed = connection
            .call_tool("region", args, None, |_| {})
            .await
            .unwrap();
        assert_eq!(routed.content[0].as_text(), Some("Zürich"));
        let failed = connection
            .call_tool("fail", None, None, |_| {})
            .await
            .unwrap();
        assert!(failed.is_error());
        let call = server
            .log()
            .into_iter()
            .find(|l| l.body["params"]["name"] == "add")
            .unwrap();
        assert_eq!(call.body["params"]["_meta"]["agent/run_id"], "run-1");
    }
}
