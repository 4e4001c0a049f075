//! The daemon with its agent: `agentd say` through the control socket, answered by a turn
//! whose call goes over a worker of a held server.

use mcp_reference_server::{Options, ReferenceServer};
use serde_json::json;

use super::*;
use crate::agent::scripted::{Scripted, calls, text};
use crate::control::{CallError, Request, Say};

/// A daemon holding `server`, its store in `dir`, every server listed.
async fn daemon(dir: &std::path::Path, server: &ReferenceServer) -> Daemon {
    let path = dir.join("agentd.toml");
    let store = dir.join("store");
    let toml = format!(
        "instance = \"d\"\n[[mcp.servers]]\nname = \"s\"\nurl = \"{}\"\n[store]\npath = \"{}\"\n",
        server.url(),
        store.display()
    );
    std::fs::write(&path, toml).unwrap();
    let config = config::load(&path, &|_| None).unwrap();
    let mut daemon = Daemon::start(config, path).await.unwrap();
    while daemon.catalogue.is_empty() {
        let report = daemon.reports.recv().await.unwrap();
        daemon.on_report(report);
    }
    daemon
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn say_is_answered_by_the_agent_over_a_worker() {
    let server = ReferenceServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = daemon(dir.path(), &server).await;
    let store_path = daemon.config.store_path.clone();
    let say = Request::Say(Say {
        say: "what is 2 + 2?".into(),
        conversation: None,
    });
    let refused = crate::control::call(&store_path, &say).await.unwrap_err();
    assert!(
        matches!(&refused, CallError::Refused(e) if e["code"] == "no_agent"),
        "{refused:?}"
    );

    let model = Scripted::new([calls(&[("c1", "s__add", r#"{"a": 2, "b": 2}"#)]), text("4")]);
    daemon.start_agent(model.clone());
    let answer = crate::control::call(&store_path, &say).await.unwrap();
    assert_eq!(answer, json!({"conversation": "root", "text": "4"}));
    let log = server.log();
    let add = log
        .iter()
        .find(|l| l.body["params"]["name"] == "add")
        .expect("the call reached the server");
    let meta = &add.body["params"]["_meta"];
    assert_eq!(meta["agent/instance"], "d");
    assert_eq!(
        meta["agent/ctx"],
        json!({"conversation": "root", "turn": 1})
    );
    // Over the worker, which declares elicitation; the supervisor's does not.
    let caps = &meta["io.modelcontextprotocol/clientCapabilities"];
    assert!(caps["elicitation"].is_object(), "{meta}");
    let asked = model.asked();
    assert_eq!(asked.len(), 2);
    let offered: Vec<&str> = asked[0].tools.iter().map(|f| f.name.as_str()).collect();
    assert!(
        offered.contains(&"s__add") && offered.contains(&"memory_get"),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|n| n.starts_with("events_")),
        "{offered:?}"
    );
    daemon.drain().await;
}
