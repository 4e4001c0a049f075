use std::sync::Arc;
use std::time::Duration;

use agentd_tools::wait::{Clock as _, Woke};
use agentd_tools::{Caller, Grants, Scope, testing};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::agent::servers::Unheld;
use crate::store::Limits;

/// The agent's parts over `store`: its gate, and the instruction and the skills of no
/// server.
pub(crate) async fn parts(store: &Store, shutdown: &CancellationToken) -> Parts {
    let tasks = tokio_util::task::TaskTracker::new();
    let gate = Gate::start(store.clone(), "t", shutdown.clone(), &tasks).await;
    let setup = workflows::Setup {
        instance: "t".into(),
        store: store.clone(),
        servers: Arc::new(workflows::NoServers),
        agent: Arc::new(workflows::Subagent),
        limits: agentd_tools::workflow::run::Limits::default(),
        bounds: workflows::Bounds::default(),
        configured: Vec::new(),
    };
    Parts {
        humans: gate.unwrap(),
        instruction: Instruction::start("t", None, Arc::new(Unheld), &tasks, shutdown.clone()),
        skills: Skills::start("t", &[], Arc::new(Unheld), &tasks, shutdown.clone()),
        subagents: Subagents::start(store.clone()).await.unwrap(),
        workflows: Workflows::start(setup, &tasks, shutdown.clone()),
        servers: Arc::new(workflows::NoServers),
        nofile: None,
    }
}

async fn own(dir: &std::path::Path, grants: Grants) -> (Own, CancellationToken) {
    own_of(dir, grants, "").await
}

/// As [`own`], the configuration's TOML `extra` after the instance's name.
async fn own_of(dir: &std::path::Path, grants: Grants, extra: &str) -> (Own, CancellationToken) {
    let limits = Limits {
        max_value_bytes: 1024,
    };
    let store = Store::open(dir, limits).await.unwrap();
    let shutdown = CancellationToken::new();
    let metrics = Arc::new(Metrics::default());
    let toml = format!("instance = \"t\"\n{extra}");
    let mut config = crate::config::parse("t.toml", &toml, &|_| None).unwrap();
    config.tool_grants = grants;
    config.max_value_bytes = 1024;
    let parts = parts(&store, &shutdown).await;
    let own = Own::new(
        store,
        &config,
        shutdown.clone(),
        metrics,
        Arc::default(),
        parts,
    );
    (own, shutdown)
}

#[tokio::test]
async fn the_durable_services_keep_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let (own, _) = own(dir.path(), Grants::default()).await;
    let services = own.tools.services();
    testing::check_memory(services).await;
    testing::check_artifacts(services).await;
    testing::check_plans(services).await;
    testing::check_messages(services).await;
    testing::check_units(services).await;
    testing::check_humans(services.humans(), services.clock()).await;
    testing::check_workflows(services.workflows()).await;
}

#[tokio::test]
async fn calls_are_counted_and_status_names_the_instance() {
    let dir = tempfile::tempdir().unwrap();
    let (own, _) = own(dir.path(), Grants::default()).await;
    let caller = Caller::operator(Scope::Root);
    let sent = own
        .call(
            &caller,
            "message.send",
            json!({"conversation": "c", "text": "hi"}),
            None,
        )
        .await
        .unwrap();
    assert_eq!(sent, json!({"id": 1}));
    let status = own.call(&caller, "status", json!({}), None).await.unwrap();
    assert_eq!(status["instance"], "t");
    assert_eq!(
        status["conversations"],
        json!([{"id": "c", "inbox": 1, "tokens": 0}])
    );
    assert_eq!(
        status["budget"],
        json!({"tokens_used": 0, "tokens_limit": null, "spent": false})
    );
    assert_eq!(status["store"]["degraded"], false);
    let e = own
        .call(&caller, "no.such", json!({}), None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "unknown_tool");
    let text = own.metrics.render();
    assert!(
        text.contains("agent_tool_calls_total{tool=\"message.send\",outcome=\"ok\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("agent_tool_calls_total{tool=\"unknown\",outcome=\"unknown_tool\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_closed_store_is_shutting_down() {
    let dir = tempfile::tempdir().unwrap();
    let (own, _) = own(dir.path(), Grants::default()).await;
    own.tools.services().store.close().await;
    let caller = Caller::operator(Scope::Root);
    let e = own
        .call(&caller, "memory.get", json!({"key": "k"}), None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "shutting_down");
}

#[tokio::test(start_paused = true)]
async fn the_clock_sleeps_until_shutdown() {
    let shutdown = CancellationToken::new();
    let clock = Clock::new(shutdown.clone());
    let before = clock.now_ms();
    assert_eq!(clock.sleep(Duration::from_secs(5)).await, Woke::Elapsed);
    assert_eq!(clock.now_ms() - before, 5000);
    shutdown.cancel();
    assert_eq!(
        clock.sleep(Duration::from_secs(3600)).await,
        Woke::ShuttingDown
    );
}

#[tokio::test]
async fn a_contract_tool_is_offered_only_when_implemented_and_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let (own, _) = own(dir.path(), Grants::default()).await;
    let listed = own.listed(Scope::Root);
    let named = |name: &str| {
        let not_offered = listed["not_offered"].as_array().unwrap();
        not_offered.iter().find(|t| t["name"] == name).cloned()
    };
    let knowledge = named("knowledge.search").expect("listed, not offered");
    let offered = listed["tools"].as_array().unwrap();
    assert!(offered.iter().all(|t| t["name"] != "knowledge.search"));
    assert!(offered.iter().any(|t| t["name"] == "memory.get"));
    assert_eq!(knowledge.as_object().unwrap().len(), 3, "{knowledge}");
    let reason = knowledge["reason"].as_str().unwrap();
    assert!(reason.contains("no knowledge.server"), "{reason}");
    assert!(
        named("exec").unwrap()["reason"]
            .as_str()
            .unwrap()
            .contains("the exec feature")
    );
    assert!(
        own.granted(Scope::Root)
            .all(|t| !contract::is_contract(t.name))
    );
    // code.run is not granted to subagents: not listed for them at all.
    let subagent = own.listed(Scope::Subagent);
    let not_offered = subagent["not_offered"].as_array().unwrap();
    assert!(not_offered.iter().all(|t| t["name"] != "code.run"));
    assert!(not_offered.iter().any(|t| t["name"] == "search.fetch"));

    let caller = Caller::operator(Scope::Root);
    let called = own.call(
        &caller,
        "code.run",
        json!({"language": "py", "code": "1"}),
        None,
    );
    let e = called.await.unwrap_err();
    assert_eq!(e.code(), "not_offered");
    assert!(
        e.to_string().starts_with("code.run is not offered: "),
        "{e}"
    );
}

#[tokio::test]
async fn a_mapped_contract_is_offered_and_called_through_the_registry() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path(),
        Limits {
            max_value_bytes: 1024,
        },
    )
    .await
    .unwrap();
    let shutdown = CancellationToken::new();
    let text = "instance = \"t\"\n[[mcp.servers]]\nname = \"kb\"\nurl = \"http://127.0.0.1:1/mcp\"\n\
                [knowledge]\nserver = \"kb\"\n[tools.grants]\nsubagent = [\"memory.*\"]\n";
    let config = crate::config::parse("t.toml", text, &|_| None).unwrap();
    let parts = parts(&store, &shutdown).await;
    let own = Own::new(
        store,
        &config,
        shutdown,
        Arc::default(),
        Arc::default(),
        parts,
    );
    let offered: Vec<&str> = own.granted(Scope::Root).map(|t| t.name).collect();
    for name in ["knowledge.search", "knowledge.get", "knowledge.list"] {
        assert!(offered.contains(&name), "{name}");
    }
    assert!(!offered.contains(&"search.query"));
    let listed = own.listed(Scope::Root);
    let tools = listed["tools"].as_array().unwrap();
    let search = tools.iter().find(|t| t["name"] == "knowledge.search");
    assert!(search.unwrap()["inputSchema"].is_object());
    let not_offered = listed["not_offered"].as_array().unwrap();
    assert!(not_offered.iter().all(|t| t["name"] != "knowledge.search"));
    assert!(not_offered.iter().any(|t| t["name"] == "search.query"));
    // Narrowed away from subagents: neither offered nor listed.
    let subagent = own.listed(Scope::Subagent);
    for part in ["tools", "not_offered"] {
        let listed = subagent[part].as_array().unwrap();
        assert!(listed.iter().all(|t| t["name"] != "knowledge.get"));
    }
    let subagent = Caller::subagent("s");
    let sub = own.call(&subagent, "knowledge.get", json!({"id": "x"}), None);
    assert_eq!(sub.await.unwrap_err().code(), "not_granted");

    let root = Caller::operator(Scope::Root);
    let bad = own.call(&root, "knowledge.search", json!({"q": "x"}), None);
    assert_eq!(bad.await.unwrap_err().code(), "invalid_arguments");
    // Checked, then called through the registry: these servers hold no kb.
    let call = own.call(&root, "knowledge.search", json!({"query": "x"}), None);
    assert_eq!(call.await.unwrap_err().code(), "not_connected");
}

/// An `exec` command called in a model's turn that ends before the command's timeout is
/// ended with the turn: the model reads what it wrote and `timed_out`, not a cut call.
#[cfg(feature = "exec")]
#[tokio::test]
async fn exec_in_a_turn_is_ended_with_the_turn_and_keeps_its_output() {
    use crate::agent::calls::tests::Unasked;
    use crate::agent::calls::{Planned, Runner};
    use crate::agent::workers::{self, Workers};

    let dir = tempfile::tempdir().unwrap();
    let enabled = "[security.exec]\nenabled = true\n";
    let (own, _) = own_of(dir.path(), Grants::default(), enabled).await;
    let workers = Workers::new(workers::cancelling(), Default::default());
    let caller = Caller::root("root");
    // The turn ends well before the runner's default timeout (60 s).
    let within = Duration::from_secs(5);
    let runner = Runner {
        own: &own,
        workers: &workers,
        caller: &caller,
        deadline: tokio::time::Instant::now() + within,
    };
    let planned = Planned::Own {
        tool: "exec".into(),
        arguments: json!({"command": ["sh", "-c", "echo started; exec sleep 1000"]}),
    };
    let said = runner
        .run(planned, AgentMeta::new("r", "t"), &Unasked)
        .await;
    let answer: Value = serde_json::from_str(&said.text).expect(&said.text);
    assert_eq!(
        (&answer["timed_out"], &answer["signal"], &answer["stdout"]),
        (&json!(true), &json!(9), &json!("started\n")),
        "{answer}"
    );
}
