//! What the server offers, the same in both eras: tools, resources, templates, prompts and
//! completions.

use serde_json::{Value, json};

/// How many tools a `tools/list` page holds, so that listing takes several pages.
pub(crate) const PAGE: usize = 2;

/// The tools, in listing order.
pub(crate) fn tools() -> Vec<Value> {
    vec![
        json!({
            "name": "add",
            "description": "Adds two integers.",
            "inputSchema": {"type": "object", "properties": {
                "a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]},
        }),
        json!({
            "name": "slow",
            "description": "Counts `steps`, sending progress every `delay_ms` when asked to.",
            "inputSchema": {"type": "object", "properties": {
                "steps": {"type": "integer"}, "delay_ms": {"type": "integer"}}},
        }),
        json!({
            "name": "ask",
            "description": "Asks the person for a name, then greets them.",
            "inputSchema": {"type": "object", "properties": {
                "asks": {"type": "integer"}, "wait_ms": {"type": "integer"}}},
        }),
        json!({
            "name": "region",
            "description": "Echoes the region it was routed to.",
            "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "query": {"type": "string"}}, "required": ["region"]},
        }),
        json!({
            "name": "fail",
            "description": "Runs and fails.",
            "inputSchema": {"type": "object"},
        }),
    ]
}

/// A tool added at run time, answering its arguments as text.
pub(crate) fn echo(name: &str) -> Value {
    json!({
        "name": name,
        "description": "Answers its arguments.",
        "inputSchema": {"type": "object"},
    })
}

/// One page of `key`'s items from `cursor` (an offset, written `p<n>`).
pub(crate) fn page(key: &str, items: Vec<Value>, cursor: Option<&str>) -> Result<Value, String> {
    let start = match cursor {
        None => 0,
        Some(c) => c
            .strip_prefix('p')
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n <= items.len())
            .ok_or_else(|| format!("invalid cursor {c:?}"))?,
    };
    let end = (start + PAGE).min(items.len());
    let mut result = json!({ key: items[start..end] });
    if end < items.len() {
        result["nextCursor"] = json!(format!("p{end}"));
    }
    Ok(result)
}

/// The schema of the tool `name`, if it exists.
pub(crate) fn input_schema(name: &str) -> Option<Value> {
    tools()
        .into_iter()
        .find(|t| t["name"] == name)
        .map(|t| t["inputSchema"].clone())
}

/// A text result.
pub(crate) fn text_result(text: &str, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

/// The result of a tool that answers at once, or `None` for one that streams or asks.
pub(crate) fn instant(name: &str, args: &Value) -> Option<Result<Value, String>> {
    Some(match name {
        "add" => match (args["a"].as_i64(), args["b"].as_i64()) {
            (Some(a), Some(b)) => {
                let mut r = text_result(&(a + b).to_string(), false);
                r["structuredContent"] = json!({"result": a + b});
                Ok(r)
            }
            _ => Ok(text_result("a and b must be integers", true)),
        },
        "region" => Ok(text_result(args["region"].as_str().unwrap_or(""), false)),
        "fail" => Ok(text_result("the tool failed", true)),
        "slow" | "ask" => return None,
        other => Err(format!("unknown tool: {other}")),
    })
}

/// The resources.
pub(crate) fn resources() -> Vec<Value> {
    vec![
        json!({"uri": "demo://greeting", "name": "greeting", "mimeType": "text/plain"}),
        json!({"uri": "demo://counter", "name": "counter", "mimeType": "text/plain"}),
    ]
}

/// The resource templates.
pub(crate) fn templates() -> Vec<Value> {
    vec![json!({"uriTemplate": "demo://item/{id}", "name": "item"})]
}

/// The contents of `uri`, given the counter's value.
pub(crate) fn read(uri: &str, counter: u64) -> Option<Value> {
    let text = match uri {
        "demo://greeting" => "hello".to_owned(),
        "demo://counter" => counter.to_string(),
        u if u.starts_with("demo://item/") => format!("item {}", &u["demo://item/".len()..]),
        _ => return None,
    };
    Some(json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]}))
}

/// The prompts.
pub(crate) fn prompts() -> Vec<Value> {
    vec![json!({"name": "greet", "arguments": [{"name": "name", "required": true}]})]
}

/// `prompts/get`.
pub(crate) fn prompt(name: &str, args: &Value) -> Option<Value> {
    (name == "greet").then(|| {
        let who = args["name"].as_str().unwrap_or("you");
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": format!("Say hello to {who}.")}}]})
    })
}

/// `completion/complete`: names starting with what was typed.
pub(crate) fn complete(value: &str) -> Value {
    let values: Vec<&str> = ["Ada", "Alan", "Grace"]
        .into_iter()
        .filter(|n| n.starts_with(value))
        .collect();
    json!({"completion": {"values": values, "total": values.len(), "hasMore": false}})
}
