//! Turns of `agentd run` as a process. Its model is the scripted Chat Completions server; its
//! servers are the reference MCP server of each era, one daemon holding both (`m` reached at
//! 2026-07-28, `l` at 2025-11-25), or the Python SDK's server of each era:
//!
//! - every MCP call of a turn carries the turn's `_meta` on the wire: `agent/run_id`,
//!   `agent/instance`, a W3C `traceparent` (one trace per turn, a span per call), `agent/ctx`
//!   and an `agent/idempotency_key` per call the model makes;
//! - a call cut at the turn's deadline is cancelled on the wire (`notifications/cancelled`,
//!   or its stream closed) and holds up no other call of its reply;
//! - a server's elicitation is a question answered through `agentd human`: a refused answer
//!   leaves it open, the answer reaches the server and the tool's result the model;
//! - the Python SDK's server: its elicitation answered the same way, its resource listed and
//!   read (`agentd resources`, `agentd read`).
//!
//! An elicitation left to its 300 s bound is a test of the agent under virtual time
//! (`src/agent/tests.rs`).

mod common;

use std::process::Output;
use std::time::Duration;

use agentd_tests::model::{Call, Reply, ScriptedModel};
use agentd_tests::peers;
use common::{Daemon, TempFile, agentd_async, polled, until};
use mcp_reference_server::{Logged, Options, ReferenceServer};
use serde_json::{Value, json};

const MODERN: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";

/// What the model reads of a call cut at the turn's deadline.
const CUT: &str = "error: the call was cut at the turn's deadline";

/// A reference server of 2026-07-28 alone (`modern`), or of 2025-11-25 alone.
async fn reference(modern: bool) -> ReferenceServer {
    let mut options = Options::default();
    options.modern = modern;
    options.legacy = !modern;
    ReferenceServer::start(options).await
}

/// `agentd run` with a model, and its store.
struct Running {
    daemon: Daemon,
    file: TempFile,
    _store: tempfile::TempDir,
}

impl Running {
    /// Starts the daemon of instance `turns` with `model`, `tail` (more TOML) and `servers`
    /// (name, URL, the revision it is reached at); returns once it holds every server at its
    /// revision and offers their tools to the model.
    async fn start(model: &ScriptedModel, tail: &str, servers: &[(&str, &str, &str)]) -> Self {
        let store = tempfile::tempdir().unwrap();
        let head = format!(
            "instance = \"turns\"\n[store]\npath = \"{}\"\n[lifecycle]\ndrain_timeout = \"5s\"\n\
             [model]\nbase_url = \"{}\"\nmodel = \"scripted\"\n{tail}",
            store.path().display(),
            model.base_url()
        );
        let named: Vec<(&str, String)> = servers
            .iter()
            .map(|(n, u, _)| (*n, u.to_string()))
            .collect();
        let file = TempFile::new(&common::config(&head, &named));
        let mut running = Self {
            daemon: Daemon::run(&file),
            file,
            _store: store,
        };
        for (name, _, revision) in servers {
            let connected =
                tokio::task::block_in_place(|| running.daemon.wait_for("mcp.connect", Some(name)));
            assert_eq!(connected["protocol"], *revision, "{connected}");
        }
        // The catalogue the daemon serves is the one its agent offers.
        let offered = || async {
            let held = running.agentd(&["tools", "--running"]).await;
            let held = String::from_utf8_lossy(&held.stdout).into_owned();
            let all = servers
                .iter()
                .all(|(name, ..)| held.contains(&format!("{name}/")));
            if all {
                Ok(())
            } else {
                Err(format!("not every server offered: {held}"))
            }
        };
        polled(Duration::from_secs(15), offered).await;
        running
    }

    /// `agentd ARGS --config F`, run to its end.
    fn agentd(&self, args: &[&str]) -> impl Future<Output = Output> + use<> {
        agentd_async(&self.file, args)
    }

    /// `agentd say --conversation C TEXT`: the model's answer.
    fn say(&self, conversation: &str, text: &str) -> impl Future<Output = String> + use<> {
        let said = self.agentd(&["say", "--conversation", conversation, text]);
        async {
            let said = said.await;
            assert_eq!(said.status.code(), Some(0), "{said:?}");
            String::from_utf8(said.stdout).unwrap()
        }
    }

    /// `agentd human answer ID ANSWER`: its exit status and stderr.
    async fn answer(&self, id: &Value, answer: Value) -> (i32, String) {
        let args = ["human", "answer", &id.to_string(), &answer.to_string()];
        let out = self.agentd(&args).await;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code().expect("an exit status"), stderr)
    }

    /// The open questions, as `agentd human list --json` prints them, once there are `n`.
    async fn questions(&self, n: usize) -> Vec<Value> {
        let listed = || async {
            let out = self.agentd(&["human", "list", "--json"]).await;
            assert!(out.status.success(), "{out:?}");
            let open: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
            match open.len() == n {
                true => Ok(open),
                false => Err(format!("not {n} open: {open:?}")),
            }
        };
        polled(Duration::from_secs(15), listed).await
    }

    /// Stops the daemon, which exits 0.
    fn stop(mut self) {
        let stopped = tokio::task::block_in_place(|| self.daemon.terminate());
        assert_eq!(stopped.code(), Some(0));
    }
}

/// The `tools/call` requests of `tool` a server received, in order.
fn calls_of(log: &[Logged], tool: &str) -> Vec<Value> {
    let calls = log
        .iter()
        .filter(|l| l.method.as_deref() == Some("tools/call") && l.body["params"]["name"] == tool);
    calls.map(|l| l.body.clone()).collect()
}

/// The results of the tool calls the model was shown in its `n`th request, in order:
/// `(call id, text)`.
fn results_shown(model: &ScriptedModel, n: usize) -> Vec<(String, String)> {
    let asked = model.requests();
    let messages = asked[n].body["messages"].as_array().unwrap().clone();
    let results = messages.into_iter().filter(|m| m["role"] == "tool");
    let pair = |m: Value| {
        let text = |v: &Value| v.as_str().unwrap().to_owned();
        (text(&m["tool_call_id"]), text(&m["content"]))
    };
    results.map(pair).collect()
}

/// A `traceparent`, checked as W3C trace context writes it (version 00, lowercase hex,
/// sampled): its trace id and span id.
fn trace(meta: &Value) -> (String, String) {
    let parent = meta["traceparent"].as_str().expect("a traceparent");
    let parts: Vec<&str> = parent.split('-').collect();
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    };
    assert!(
        parts.len() == 4 && parts[0] == "00" && parts[3] == "01",
        "{parent}"
    );
    assert!(hex(parts[1], 32) && hex(parts[2], 16), "{parent}");
    assert!(
        parts[1] != "0".repeat(32) && parts[2] != "0".repeat(16),
        "{parent}"
    );
    (parts[1].to_owned(), parts[2].to_owned())
}

/// The model calls tools of both servers and one of agentd's own in one reply, then in a
/// second turn once more: each MCP call carries the turn's `_meta` on the wire, the same
/// run id and trace for the calls of a turn, its own span and idempotency key for each call,
/// none of them shared with the other turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_call_of_a_turn_carries_its_meta_on_the_wire_in_each_era() {
    let (m, l) = (reference(true).await, reference(false).await);
    let model = ScriptedModel::start([
        Reply::tool_calls([
            Call::new("c1", "m__add", r#"{"a": 2, "b": 3}"#),
            Call::new("c2", "memory_set", r#"{"key": "k", "value": 1}"#),
            Call::new("c3", "l__add", r#"{"a": 1, "b": 1}"#),
            Call::new("c4", "m__add", r#"{"a": 4, "b": 4}"#),
        ]),
        Reply::text("5, 2 and 8; k is kept"),
        // Some models give every reply's calls the same ids.
        Reply::tool_calls([Call::new("c1", "l__add", r#"{"a": 0, "b": 1}"#)]),
        Reply::text("1"),
    ])
    .await;
    let running = Running::start(
        &model,
        "",
        &[("m", &m.url(), MODERN), ("l", &l.url(), LEGACY)],
    )
    .await;

    let said = running.say("c1", "add, and keep 1 as k").await;
    assert_eq!(said, "5, 2 and 8; k is kept\n");
    let mut shown = results_shown(&model, 1);
    shown.sort();
    let shown: Vec<(&str, &str)> = shown
        .iter()
        .map(|(c, t)| (c.as_str(), t.as_str()))
        .collect();
    assert_eq!(
        shown,
        [
            ("c1", "5"),
            ("c2", r#"{"version":1}"#),
            ("c3", "2"),
            ("c4", "8")
        ]
    );
    let kept = running.agentd(&[
        "tool",
        "call",
        "--conversation",
        "c1",
        "memory.get",
        r#"{"key": "k"}"#,
    ]);
    let kept: Value = serde_json::from_slice(&kept.await.stdout).unwrap();
    assert_eq!(kept["value"], 1, "{kept}");
    assert_eq!(running.say("c1", "and 0 + 1?").await, "1\n");

    // Turn 1: two calls of `m`, one of `l`; turn 2: one of `l`.
    let (m_log, l_log) = (m.log(), l.log());
    let (m_adds, l_adds) = (calls_of(&m_log, "add"), calls_of(&l_log, "add"));
    assert_eq!((m_adds.len(), l_adds.len()), (2, 2));
    let first: Vec<&Value> = [&m_adds[0], &m_adds[1], &l_adds[0]]
        .map(|c| &c["params"]["_meta"])
        .to_vec();
    let second = &l_adds[1]["params"]["_meta"];
    assert_eq!(l_adds[1]["params"]["arguments"], json!({"a": 0, "b": 1}));

    let run_id = first[0]["agent/run_id"]
        .as_str()
        .expect("a run id")
        .to_owned();
    assert!(
        run_id.len() == 32
            && run_id
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
        "{run_id}"
    );
    let (trace_id, _) = trace(first[0]);
    let mut spans = Vec::new();
    let mut keys = Vec::new();
    for meta in &first {
        assert_eq!(meta["agent/run_id"], run_id.as_str(), "one run id per turn");
        assert_eq!(meta["agent/instance"], "turns");
        assert_eq!(meta["agent/ctx"], json!({"conversation": "c1", "turn": 1}));
        let (trace_of, span) = trace(meta);
        assert_eq!(trace_of, trace_id, "one trace per turn");
        spans.push(span);
        keys.push(
            meta["agent/idempotency_key"]
                .as_str()
                .expect("a key")
                .to_owned(),
        );
    }
    let (second_trace, second_span) = trace(second);
    spans.push(second_span);
    keys.push(
        second["agent/idempotency_key"]
            .as_str()
            .expect("a key")
            .to_owned(),
    );
    spans.sort();
    spans.dedup();
    keys.sort();
    keys.dedup();
    assert_eq!(spans.len(), 4, "a span per call");
    assert_eq!(keys.len(), 4, "a key per call of the model");
    assert_eq!(second["agent/instance"], "turns");
    assert_eq!(
        second["agent/ctx"],
        json!({"conversation": "c1", "turn": 2})
    );
    assert_ne!(second["agent/run_id"], run_id.as_str(), "a run id per turn");
    assert_ne!(second_trace, trace_id, "a trace per turn");

    // Each era's own: the 2026-07-28 calls state their revision in `_meta`, the 2025-11-25
    // ones in the session's header alone.
    for meta in [first[0], first[1]] {
        assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], MODERN);
    }
    assert_eq!(
        first[2].get("io.modelcontextprotocol/protocolVersion"),
        None
    );
    let l_call = l_log
        .iter()
        .find(|c| c.method.as_deref() == Some("tools/call"))
        .unwrap();
    assert_eq!(l_call.header("mcp-protocol-version"), Some(LEGACY));
    assert!(l_call.header("mcp-session-id").is_some());
    running.stop();
}

/// With a turn deadline of 10 s, the model calls a tool of each server that would count
/// for ten minutes, and one of each that answers at once: those two answer, the slow ones
/// are cut at the deadline and cancelled on the wire, the turn fails, and the next turn
/// shows the model every result, the quick ones first.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_cut_at_the_deadline_is_cancelled_and_holds_up_no_other() {
    let (m, l) = (reference(true).await, reference(false).await);
    let slow = r#"{"steps": 600, "delay_ms": 1000}"#;
    let model = ScriptedModel::start([
        Reply::tool_calls([
            Call::new("m_slow", "m__slow", slow),
            Call::new("l_slow", "l__slow", slow),
            Call::new("m_sum", "m__add", r#"{"a": 1, "b": 2}"#),
            Call::new("l_sum", "l__add", r#"{"a": 3, "b": 4}"#),
        ]),
        Reply::text("the slow ones were cut"),
    ])
    .await;
    let mut running = Running::start(
        &model,
        "[limits]\nturn_timeout = \"10s\"\n",
        &[("m", &m.url(), MODERN), ("l", &l.url(), LEGACY)],
    )
    .await;

    // Through `message.send`: nobody waits for the turn. It is under way once every call
    // reached its server.
    let sent = json!({"conversation": "c2", "text": "count slowly, and add"});
    let sent = running.agentd(&["tool", "call", "message.send", &sent.to_string()]);
    let sent = sent.await;
    assert!(sent.status.success(), "{sent:?}");
    let reached = |server: &ReferenceServer| {
        let log = server.log();
        calls_of(&log, "slow").len() == 1 && calls_of(&log, "add").len() == 1
    };
    until("every call reached its server", || {
        reached(&m) && reached(&l)
    })
    .await;

    // The next message waits for the turn's end; its turn shows the model every result: the
    // quick ones as they came, before the slow ones were cut.
    assert_eq!(running.say("c2", "and?").await, "the slow ones were cut\n");
    let shown = results_shown(&model, 1);
    let (quick, cut) = shown.split_at(2);
    let mut quick = quick.to_vec();
    quick.sort();
    assert_eq!(
        quick,
        [("l_sum".into(), "7".into()), ("m_sum".into(), "3".into())]
    );
    let mut cut = cut.to_vec();
    cut.sort();
    assert_eq!(
        cut,
        [("l_slow".into(), CUT.into()), ("m_slow".into(), CUT.into())]
    );
    let failed = tokio::task::block_in_place(|| running.daemon.wait_for("turn.failed", None));
    assert_eq!(
        (&failed["conversation"], &failed["turn"], &failed["err"]),
        (
            &json!("c2"),
            &json!(1),
            &json!("the turn's deadline passed")
        )
    );

    // On the wire: the legacy server is told, the modern one sees the call's stream close.
    let (l_slow, m_slow) = (calls_of(&l.log(), "slow"), calls_of(&m.log(), "slow"));
    let cancelled = || {
        let log = l.log();
        let told = log
            .iter()
            .filter(|c| c.method.as_deref() == Some("notifications/cancelled"));
        told.map(|c| c.body["params"]["requestId"].clone())
            .collect::<Vec<_>>()
    };
    until("l is told the slow call is cancelled", || {
        cancelled() == [l_slow[0]["id"].clone()]
    })
    .await;
    until("m sees the slow call's stream close", || {
        m.abandoned().contains(&m_slow[0]["id"])
    })
    .await;
    running.stop();
}
/// Each server's `ask` elicits a name during a turn: both questions are listed by `agentd
/// human list` with their server; an answer that does not fit is refused and leaves the
/// question open; the answers reach the servers (POSTed to the legacy one, sent with the
/// modern call made again) and the tools' results the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_s_question_is_answered_through_agentd_human_in_each_era() {
    let (m, l) = (reference(true).await, reference(false).await);
    let model = ScriptedModel::start([
        Reply::tool_calls([
            Call::new("qm", "m__ask", "{}"),
            // The legacy server waits two minutes for its answer.
            Call::new("ql", "l__ask", r#"{"wait_ms": 120000}"#),
        ]),
        Reply::text("greeted both"),
    ])
    .await;
    let running = Running::start(
        &model,
        "",
        &[("m", &m.url(), MODERN), ("l", &l.url(), LEGACY)],
    )
    .await;
    let said = running.say("c3", "greet someone");

    let open = running.questions(2).await;
    let of = |server: &str| {
        let question = open.iter().find(|q| q["from"] == server);
        question
            .unwrap_or_else(|| panic!("no question from {server}: {open:?}"))
            .clone()
    };
    let (qm, ql) = (of("m"), of("l"));
    for q in [&qm, &ql] {
        assert_eq!(q["origin"], "elicitation");
        assert_eq!(q["question"], "What is your name?");
        assert_eq!(q["schema"]["required"], json!(["name"]));
    }
    // Refused: it does not fit the schema; the question stays open.
    let (code, stderr) = running.answer(&qm["id"], json!({"name": 1})).await;
    assert_eq!(code, 5, "{stderr}");
    assert!(stderr.starts_with("agentd: bad_answer: "), "{stderr}");
    assert!(stderr.contains("\"/name\""), "{stderr}");
    assert_eq!(running.questions(2).await.len(), 2, "still open");

    let (code, stderr) = running.answer(&qm["id"], json!({"name": "Ada"})).await;
    assert_eq!(code, 0, "{stderr}");
    let (code, stderr) = running.answer(&ql["id"], json!({"name": "Bo"})).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(said.await, "greeted both\n");
    assert_eq!(running.questions(0).await, Vec::<Value>::new());

    let mut shown = results_shown(&model, 1);
    shown.sort();
    assert_eq!(
        shown,
        [
            ("ql".into(), "accept: name='Bo'".into()),
            ("qm".into(), "accept: name='Ada'".into())
        ]
    );
    // On the wire: the legacy server's request answered with a POST of its own; the modern
    // call made again with the answer to its input request.
    let accepted = |name: &str| json!({"action": "accept", "content": {"name": name}});
    let l_log = l.log();
    let posted = l_log
        .iter()
        .find(|c| c.method.is_none() && c.body["result"].is_object())
        .expect("the answer is POSTed");
    assert_eq!(posted.body["result"], accepted("Bo"));
    let m_asks = calls_of(&m.log(), "ask");
    assert_eq!(m_asks.len(), 2, "asked, then called again with the answer");
    let again = &m_asks[1]["params"];
    assert_eq!(again["inputResponses"]["name"], accepted("Ada"));
    assert!(again["requestState"].is_string(), "{again}");
    running.stop();
}

/// The Python SDK's server in each era (`py` reached at 2026-07-28, `pyl` serving
/// 2025-11-25 alone): its elicitations during a turn (through a resolver at 2026-07-28, mid
/// call at 2025-11-25) are questions answered through `agentd human`, and its resource is
/// listed and read.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_python_sdk_server_s_question_and_resource_in_each_era() {
    let (modern, legacy) = (peers::python(false), peers::python_legacy());
    let model = ScriptedModel::start([
        Reply::tool_calls([
            Call::new("pm", "py__ask_name_rounds", "{}"),
            Call::new("pl", "pyl__ask_name", "{}"),
        ]),
        Reply::text("named both"),
    ])
    .await;
    let running = Running::start(
        &model,
        "",
        &[("py", &modern.url, MODERN), ("pyl", &legacy.url, LEGACY)],
    )
    .await;
    let said = running.say("c4", "ask their names");
    let open = running.questions(2).await;
    for q in &open {
        assert_eq!(q["origin"], "elicitation", "{q}");
        assert_eq!(q["question"], "What is your name?", "{q}");
        assert_eq!(q["schema"]["properties"]["name"]["type"], "string", "{q}");
    }
    let id_of = |server: &str| {
        let question = open.iter().find(|q| q["from"] == server);
        question.unwrap_or_else(|| panic!("no question from {server}: {open:?}"))["id"].clone()
    };
    let (code, stderr) = running.answer(&id_of("pyl"), json!({"name": ["Bo"]})).await;
    assert_eq!(code, 5, "{stderr}");
    assert_eq!(running.questions(2).await.len(), 2, "still open");
    let (code, stderr) = running.answer(&id_of("py"), json!({"name": "Ada"})).await;
    assert_eq!(code, 0, "{stderr}");
    let (code, stderr) = running.answer(&id_of("pyl"), json!({"name": "Bo"})).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(said.await, "named both\n");
    let mut shown = results_shown(&model, 1);
    shown.sort();
    assert_eq!(
        shown,
        [
            ("pl".into(), "accept: name='Bo'".into()),
            ("pm".into(), "accept: name='Ada'".into())
        ]
    );

    // Its resource, in each era.
    let listed = running.agentd(&["resources"]).await;
    assert!(listed.status.success(), "{listed:?}");
    let listed = String::from_utf8(listed.stdout).unwrap();
    for server in ["py", "pyl"] {
        let line = format!("{server}\tdemo://greeting\tgreeting\ttext/plain");
        assert!(listed.lines().any(|l| l == line), "{listed}");
        let read = running.agentd(&["read", server, "demo://greeting"]).await;
        assert!(read.status.success(), "{read:?}");
        assert_eq!(String::from_utf8_lossy(&read.stdout), "hello\n", "{server}");
    }
    running.stop();
}
