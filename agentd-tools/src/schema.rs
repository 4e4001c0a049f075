//! Every tool's input JSON Schema, and the output JSON Schema of each built tool's answer.
//!
//! The schemas say what a JSON Schema can; the rest (a key's bytes, a duration's range, a
//! size decoded) the tool checks itself, with the same `invalid_arguments` error or the
//! contract's own code (`bad_key`, `too_large`).

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::Error;

/// The most questions one `decide` asks.
pub const QUESTIONS_MAX: usize = 20;

/// The largest duration of `sleep` and `await`, in milliseconds (1 h).
pub const DURATION_MAX_MS: u64 = 3_600_000;

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn none() -> Value {
    object(json!({}), &[])
}

fn text() -> Value {
    json!({"type": "string", "minLength": 1})
}

/// A duration: a humantime string ("5s", "1m 30s") or milliseconds, 1 ms ..= 1 h.
pub(crate) fn duration() -> Value {
    json!({"type": ["string", "integer"], "minLength": 1, "minimum": 1, "maximum": DURATION_MAX_MS})
}

fn plan_step() -> Value {
    object(
        json!({"title": text(), "status": status_enum()}),
        &["title"],
    )
}

fn status_enum() -> Value {
    json!({"enum": ["pending", "in_progress", "done", "skipped", "failed"]})
}

fn steps() -> Value {
    json!({"type": "array", "items": plan_step(), "minItems": 1})
}

/// A duration argument: a humantime string (`"5s"`) or milliseconds; 1 ms ..= 1 h.
pub fn read_duration(tool: &str, pointer: &str, value: &Value) -> Result<Duration, Error> {
    let range = || Error::invalid(tool, pointer, "range", "a duration is 1 ms to 1 h");
    let d = match value {
        Value::String(text) => humantime::parse_duration(text)
            .map_err(|e| Error::invalid(tool, pointer, "duration", e.to_string()))?,
        Value::Number(n) => Duration::from_millis(n.as_u64().ok_or_else(range)?),
        _ => {
            return Err(Error::invalid(
                tool,
                pointer,
                "type",
                "a string or an integer",
            ));
        }
    };
    if d < Duration::from_millis(1) || d > Duration::from_millis(DURATION_MAX_MS) {
        return Err(range());
    }
    Ok(d)
}

/// The input schema of `tool`; `None` when no tool has that name.
pub(crate) fn input(tool: &str) -> Option<Value> {
    let id = |name: &str| object(json!({name: text()}), &[name]);
    let schema = match tool {
        "instruction.read" => none(),
        "resource.read" => object(json!({"uri": text(), "server": text()}), &["uri"]),
        "instruction.subscribe" => object(json!({"uri": text(), "server": text()}), &["uri"]),
        "subagent.run" => object(
            json!({
                "goal": text(),
                "tools": {"type": "array", "items": text()},
                "servers": {"type": "array", "items": text()},
                "deadline": duration(),
            }),
            &["goal"],
        ),
        "subagent.send" => object(json!({"id": text(), "text": text()}), &["id", "text"]),
        "subagent.status" | "subagent.kill" | "subagent.retire" => id("id"),
        "subagent.await" => object(json!({"id": text(), "timeout": duration()}), &["id"]),
        "subagent.list" => none(),
        "memory.get" | "memory.shift" | "memory.pop" | "memory.delete" => id("key"),
        "memory.set" => object(
            json!({"key": text(), "value": {}, "expected_version": natural()}),
            &["key", "value"],
        ),
        "memory.list" => object(
            json!({
                "prefix": {"type": "string"},
                "after": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1},
            }),
            &[],
        ),
        "memory.push" => object(json!({"key": text(), "value": {}}), &["key", "value"]),
        "artifact.create" => json!({
            "type": "object",
            "properties": {
                "name": text(),
                "media_type": text(),
                "text": {"type": "string"},
                "base64": {"type": "string"},
            },
            "required": ["name", "media_type"],
            "additionalProperties": false,
            "oneOf": [{"required": ["text"]}, {"required": ["base64"]}],
        }),
        "artifact.get" | "artifact.delete" => id("name"),
        "artifact.list" => none(),
        "message.send" => object(
            json!({"conversation": text(), "text": text()}),
            &["conversation", "text"],
        ),
        "events.list" => id("server"),
        "events.subscribe" => object(
            json!({
                "server": text(),
                "event": text(),
                "into": text(),
                "arguments": {"type": "object"},
                "delivery": {
                    "type": "array",
                    "items": {"enum": ["webhook", "poll", "push"]},
                    "minItems": 1,
                },
                "lifetime_s": {"type": "integer", "minimum": 1, "maximum": 2_592_000},
            }),
            &["server", "event", "into"],
        ),
        "events.unsubscribe" => id("subscription"),
        "events.subscriptions" => none(),
        "workflow.run" => object(json!({"workflow": text(), "input": {}}), &["workflow"]),
        "workflow.cancel" | "workflow.status" | "workflow.pause" | "workflow.resume" => id("run"),
        "workflow.wait" => object(json!({"run": text(), "timeout": duration()}), &["run"]),
        "workflow.list" => object(
            json!({"workflow": text(), "status": text(), "after": text(), "limit": {"type": "integer", "minimum": 1, "maximum": 100}}),
            &[],
        ),
        "workflow.signal" => object(
            json!({"run": text(), "signal": text(), "payload": {}}),
            &["run", "signal"],
        ),
        "workflow.create" | "workflow.update" => object(
            json!({"name": text(), "definition": {"type": "object"}}),
            &["name", "definition"],
        ),
        "workflow.delete" => id("name"),
        "plan.create" => object(json!({"steps": steps()}), &["steps"]),
        "plan.get" | "plan.clear" => none(),
        "plan.update" => json!({
            "type": "object",
            "properties": {
                "steps": steps(),
                "step": {"type": "integer", "minimum": 0},
                "status": status_enum(),
                "title": text(),
            },
            "additionalProperties": false,
            "oneOf": [
                {"required": ["steps"], "not": {"anyOf": [
                    {"required": ["step"]}, {"required": ["status"]}, {"required": ["title"]}
                ]}},
                {"required": ["step"], "not": {"required": ["steps"]}},
            ],
        }),
        "ask_human" => object(
            json!({"question": text(), "schema": {"type": "object"}, "timeout": duration()}),
            &["question", "schema"],
        ),
        "sleep" => object(json!({"duration": duration()}), &["duration"]),
        "await" => object(
            json!({
                "until": {
                    "type": "object",
                    "minProperties": 1,
                    "maxProperties": 1,
                    "properties": {
                        "memory": object(json!({"key": text(), "equals": {}}), &["key"]),
                        "message": object(json!({"conversation": text(), "after": natural()}), &["conversation"]),
                        "stream": object(json!({"name": text(), "after": natural()}), &["name"]),
                        "run": text(),
                        "subagent": text(),
                    },
                    "additionalProperties": false,
                },
                "timeout": duration(),
            }),
            &["until"],
        ),
        "context.compact" => object(
            json!({"keep": {"type": "integer", "minimum": 0}, "instructions": text()}),
            &[],
        ),
        "think" => object(
            json!({"prompt": text(), "schema": {"type": "object"}}),
            &["prompt"],
        ),
        "decide" => object(
            json!({
                "questions": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": QUESTIONS_MAX,
                    "items": object(
                        json!({
                            "id": text(),
                            "question": text(),
                            "type": {"enum": ["boolean", "choice", "number", "text"]},
                            "options": {"type": "array", "items": text(), "minItems": 2},
                        }),
                        &["id", "question", "type"],
                    ),
                },
                "context": {"type": "string"},
            }),
            &["questions"],
        ),
        "skills.list" => none(),
        "skills.load" => object(
            json!({
                "name": text(),
                "arguments": {"type": "object", "additionalProperties": {"type": "string"}},
            }),
            &["name"],
        ),
        "skills.unload" => id("name"),
        "finish" => object(
            json!({"status": {"enum": ["done", "failed", "cancelled"]}, "summary": {"type": "string"}}),
            &["status", "summary"],
        ),
        "status" => none(),
        "knowledge.search" | "search.query" => object(
            json!({"query": text(), "limit": {"type": "integer", "minimum": 1, "maximum": 100}}),
            &["query"],
        ),
        "knowledge.get" => id("id"),
        "knowledge.list" => object(
            json!({"after": text(), "limit": {"type": "integer", "minimum": 1, "maximum": 100}}),
            &[],
        ),
        "search.fetch" => id("url"),
        "code.run" => object(
            json!({"language": text(), "code": text(), "timeout": duration()}),
            &["language", "code"],
        ),
        "exec" => object(
            json!({
                "command": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "stdin": {"type": "string"},
                "timeout": duration(),
            }),
            &["command"],
        ),
        _ => return None,
    };
    Some(schema)
}

fn natural() -> Value {
    json!({"type": "integer", "minimum": 0})
}

fn boolean() -> Value {
    json!({"type": "boolean"})
}

fn list(items: Value) -> Value {
    json!({"type": "array", "items": items})
}

/// A closed object of `properties`, every one of them required.
fn record(properties: Value) -> Value {
    let names: Vec<String> = properties
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    let required: Vec<&str> = names.iter().map(String::as_str).collect();
    object(properties, &required)
}

fn artifact(content: Option<&str>) -> Value {
    let mut properties = json!({"name": text(), "media_type": text(), "bytes": natural()});
    if let Some(content) = content {
        properties[content] = json!({"type": "string"});
    }
    record(properties)
}

fn plan() -> Value {
    let step = record(json!({"title": text(), "status": status_enum()}));
    record(json!({"steps": list(step), "version": natural()}))
}

fn subscription() -> Value {
    record(json!({
        "id": text(),
        "owner": text(),
        "server": text(),
        "event": text(),
        "into": text(),
        "arguments": {"type": "object"},
        "delivery": list(json!({"enum": ["webhook", "poll", "push"]})),
        "expires_ms": {"type": "integer"},
    }))
}

fn event_type() -> Value {
    object(
        json!({
            "name": text(),
            "description": {"type": "string"},
            "delivery": list(json!({"type": "string"})),
            "inputSchema": {},
            "payloadSchema": {},
            "_meta": {"type": "object"},
        }),
        &["name", "delivery"],
    )
}

fn nullable(kind: &str) -> Value {
    json!({"type": [kind, "null"]})
}

/// A subagent's status.
fn subagent() -> Value {
    // As `subagent::State::ALL` names them (a test there checks).
    let states = [
        "running",
        "finished",
        "failed",
        "timed_out",
        "killed",
        "retired",
    ];
    record(json!({
        "id": text(),
        "parent": text(),
        "state": {"enum": states},
        "turns": natural(),
        "tokens": natural(),
        "answer": nullable("string"),
        "error": nullable("string"),
        "deadline_ms": nullable("integer"),
        "started_ms": {"type": "integer"},
    }))
}

fn skill() -> Value {
    let argument = record(json!({
        "name": text(),
        "description": nullable("string"),
        "required": boolean(),
    }));
    record(json!({
        "name": text(),
        "server": text(),
        "prompt": text(),
        "description": nullable("string"),
        "arguments": list(argument),
    }))
}

/// A failure of a run or a step, or null.
fn failure() -> Value {
    json!({"oneOf": [
        {"type": "null"},
        record(json!({"code": text(), "message": {"type": "string"}})),
    ]})
}

fn run_status() -> Value {
    json!({"enum": ["running", "paused", "completed", "failed", "cancelled"]})
}

/// A run, as `workflow.status` says it.
fn run() -> Value {
    let step = record(json!({
        "id": text(),
        "status": {"enum": ["pending", "running", "retrying", "waiting", "done", "failed", "cancelled"]},
        "attempt": natural(),
        "output": {},
        "error": failure(),
    }));
    record(json!({
        "run": text(),
        "workflow": text(),
        "status": run_status(),
        "step": nullable("string"),
        "by": text(),
        "input": {},
        "output": {},
        "error": failure(),
        "steps": list(step),
        "signals": natural(),
        "started_ms": {"type": "integer"},
        "updated_ms": {"type": "integer"},
        "ended_ms": nullable("integer"),
    }))
}

/// A run, as `workflow.list` says it.
fn run_summary() -> Value {
    record(json!({
        "run": text(),
        "workflow": text(),
        "status": run_status(),
        "step": nullable("string"),
        "started_ms": {"type": "integer"},
        "ended_ms": nullable("integer"),
    }))
}

/// The JSON Schema of `tool`'s answer; `None` for a tool not built, and only for one.
pub(crate) fn output(tool: &str) -> Option<Value> {
    let schema = match tool {
        "memory.get" => record(json!({"value": {}, "version": natural()})),
        "memory.set" => record(json!({"version": natural()})),
        "memory.list" => record(json!({
            "keys": list(record(json!({"key": text(), "version": natural(), "bytes": natural()}))),
            "next": {"type": ["string", "null"]},
        })),
        "memory.push" => record(json!({"length": natural(), "version": natural()})),
        "memory.shift" | "memory.pop" => json!({"oneOf": [
            record(json!({"value": {}, "version": natural()})),
            record(json!({"value": {"type": "null"}, "empty": {"const": true}, "version": natural()})),
        ]}),
        "memory.delete" | "artifact.delete" | "workflow.delete" => {
            record(json!({"deleted": boolean()}))
        }
        "artifact.create" => artifact(None),
        "artifact.get" => json!({"oneOf": [artifact(Some("text")), artifact(Some("base64"))]}),
        "artifact.list" => record(json!({"artifacts": list(artifact(None))})),
        "plan.create" | "plan.update" => record(json!({"plan": plan()})),
        "plan.get" => record(json!({"plan": {"oneOf": [{"type": "null"}, plan()]}})),
        "plan.clear" => record(json!({"cleared": boolean()})),
        "message.send" => record(json!({"id": natural()})),
        "status" => record(json!({
            "instance": text(),
            "conversations": list(record(json!({
                "id": text(),
                "inbox": natural(),
                "tokens": natural(),
            }))),
            "runs": list(run_summary()),
            "subagents": list(subagent()),
            "units_finished": natural(),
            "budget": record(json!({
                "tokens_used": natural(),
                "tokens_limit": {"type": ["integer", "null"], "minimum": 1},
                "spent": boolean(),
            })),
            "store": record(json!({"bytes": natural(), "degraded": boolean()})),
        })),
        "sleep" => record(json!({"slept_ms": natural(), "cancelled": boolean()})),
        "await" => {
            let met =
                |what: &str, value: Value| record(json!({"met": {"const": true}, what: value}));
            json!({"oneOf": [
                record(json!({"met": {"const": false}})),
                met("memory", record(json!({"key": text(), "value": {}, "version": natural()}))),
                met("message", record(json!({
                    "conversation": text(),
                    "id": natural(),
                    "from": text(),
                    "text": {"type": "string"},
                    "at_ms": natural(),
                }))),
                met("stream", record(json!({"name": text(), "seq": natural(), "data": {}}))),
                met("subagent", subagent()),
                met("run", run_summary()),
            ]})
        }
        "ask_human" => json!({"oneOf": [
            record(json!({"id": natural(), "answer": {}})),
            record(json!({"id": natural(), "cancelled": {"const": true}})),
        ]}),
        "finish" => record(json!({
            "unit": text(),
            "status": {"enum": ["done", "failed", "cancelled"]},
            "artifacts": list(text()),
        })),
        "events.list" => record(json!({"server": text(), "types": list(event_type())})),
        "events.subscribe" | "events.unsubscribe" => {
            record(json!({"subscription": subscription()}))
        }
        "events.subscriptions" => record(json!({"subscriptions": list(subscription())})),
        "instruction.read" | "instruction.subscribe" => record(json!({
            "server": nullable("string"),
            "uri": nullable("string"),
            "text": nullable("string"),
            "read_at_ms": nullable("integer"),
            "subscribed": boolean(),
        })),
        "skills.list" => record(json!({"skills": list(skill()), "loaded": list(text())})),
        "skills.load" => record(json!({
            "name": text(),
            "server": text(),
            "messages": natural(),
            "bytes": natural(),
            "loaded": list(text()),
        })),
        "skills.unload" => record(json!({"unloaded": boolean(), "loaded": list(text())})),
        "subagent.run" => record(json!({"id": text()})),
        "resource.read" => {
            let contents = json!({
                "type": "object",
                "properties": {"uri": text(), "mimeType": text(), "text": {"type": "string"},
                    "blob": {"type": "string"}},
                "required": ["uri"],
                "oneOf": [{"required": ["text"]}, {"required": ["blob"]}],
            });
            record(json!({"server": text(), "uri": text(), "contents": list(contents)}))
        }
        "subagent.send" | "subagent.status" | "subagent.await" | "subagent.kill"
        | "subagent.retire" => subagent(),
        "subagent.list" => record(json!({"subagents": list(subagent())})),
        "think" => json!({"oneOf": [
            record(json!({"thought": {"type": "string"}})),
            record(json!({"thought": {"type": "string"}, "answer": {"type": "object"}})),
        ]}),
        "decide" => {
            let answer = record(json!({
                "id": text(),
                "answer": {"type": ["boolean", "number", "string"]},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            }));
            record(json!({"answers": list(answer)}))
        }
        "context.compact" => record(json!({
            "replaced": natural(),
            "kept": natural(),
            "summary": nullable("string"),
        })),
        "workflow.create" | "workflow.update" => {
            record(json!({"workflow": text(), "version": natural(), "steps": natural()}))
        }
        "workflow.run" | "workflow.status" | "workflow.wait" | "workflow.cancel"
        | "workflow.pause" | "workflow.resume" | "workflow.signal" => run(),
        "workflow.list" => record(json!({"runs": list(run_summary()), "next": nullable("string")})),
        "exec" => {
            let cut = record(json!({"stdout": boolean(), "stderr": boolean()}));
            record(json!({
                "exit_code": nullable("integer"),
                "signal": nullable("integer"),
                "timed_out": boolean(),
                "duration_ms": natural(),
                "stdout": {"type": "string"},
                "stderr": {"type": "string"},
                "truncated": cut,
            }))
        }
        _ => return None,
    };
    Some(schema)
}

/// Panics unless `answer` fits `tool`'s output schema, naming every failure.
#[cfg(test)]
pub(crate) fn assert_answer(tool: &str, answer: &Value) {
    let schema = crate::tool(tool)
        .and_then(|t| t.output_schema.as_ref())
        .unwrap_or_else(|| panic!("{tool} answers, so it has an output schema"));
    let validator = jsonschema::draft202012::new(schema).expect("every output schema compiles");
    let failures: Vec<String> = validator
        .iter_errors(answer)
        .map(|e| format!("{}: {e}", e.instance_path().as_str()))
        .collect();
    assert!(
        failures.is_empty(),
        "{tool} answered {answer}: {failures:?}"
    );
}

/// The arguments of a tool that takes none.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Empty {}

/// The arguments of `tool`, already checked against its schema, as `T`.
pub(crate) fn parse<T: DeserializeOwned>(tool: &str, arguments: Value) -> Result<T, Error> {
    serde_json::from_value(arguments).map_err(|e| Error::invalid(tool, "", "type", e.to_string()))
}
