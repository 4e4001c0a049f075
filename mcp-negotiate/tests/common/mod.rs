//! Helpers shared by the connection tests: JSON objects, the arguments of `add`, bounded
//! waiting, and an elicitation handler.

// Each test file uses only some of the helpers.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use mcp_wire::{ElicitRequestParams, ElicitResult};
use serde_json::{Map, Value, json};

/// A JSON object's members, for tool arguments and elicitation content.
pub(crate) fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// The arguments of `add`.
pub(crate) fn add_args(a: i64, b: i64) -> Map<String, Value> {
    object(json!({"a": a, "b": b}))
}

/// Bounds a future that must finish in a test: a hang fails the test instead of blocking it.
pub(crate) async fn bounded<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within 5 s"))
}

/// An elicitation handler that accepts with `{"name": "Ada"}`.
#[derive(Debug)]
pub(crate) struct AcceptAda;

impl mcp_transport::driver::Elicitor for AcceptAda {
    fn elicit(
        &self,
        _params: ElicitRequestParams,
    ) -> Pin<Box<dyn Future<Output = ElicitResult> + Send + '_>> {
        Box::pin(async { ElicitResult::accept(object(json!({"name": "Ada"}))) })
    }
}
