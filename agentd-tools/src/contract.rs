//! The contracts: own tools whose work a configured MCP server does (the reference's
//! `knowledge.*`, `search.*`, `code.run` and `exec` rows), and the names of the supervisor's
//! tool registry (`server/tool`).
//!
//! A contract tool keeps its own name, default grants and input schema (the catalogue's);
//! its answer is the implementing tool's `CallToolResult` as the server gave it
//! ([`output_schema`]). Which server implements it is the daemon's configuration: a
//! family's server (`knowledge.server`, `search.server`) implementing the tools by the
//! contract's names, or a mapping of one tool to any server's tool. `code.run` and `exec`
//! have no family server: only a mapping implements them (and `exec` also a local runner).
//!
//! ```
//! use agentd_tools::contract;
//!
//! assert!(contract::is_contract("knowledge.get"));
//! assert_eq!(contract::family("search.fetch"), Some("search"));
//! assert_eq!(contract::family("code.run"), None);
//! assert_eq!(contract::registry_tool("weather/get_forecast"), Some(("weather", "get_forecast")));
//! assert_eq!(contract::registry_tool("memory.get"), None);
//! ```

use serde_json::{Value, json};

/// Every contract tool, in the catalogue's order.
pub const TOOLS: [&str; 7] = [
    "knowledge.search",
    "knowledge.get",
    "knowledge.list",
    "search.query",
    "search.fetch",
    "code.run",
    "exec",
];

/// The families whose server implements their tools by name.
pub const FAMILIES: [&str; 2] = ["knowledge", "search"];

/// Whether `name` is a contract tool.
pub fn is_contract(name: &str) -> bool {
    TOOLS.contains(&name)
}

/// The family of contract tool `name` whose server may implement it by name (`knowledge`,
/// `search`); `None` for `code.run` and `exec`, which only a mapping implements, and for a
/// name that is no contract tool.
pub fn family(name: &str) -> Option<&'static str> {
    if !is_contract(name) {
        return None;
    }
    let (family, _) = name.split_once('.')?;
    FAMILIES.into_iter().find(|f| *f == family)
}

/// A tool of the supervisor's registry, named as the supervisor's catalogue names it
/// (`agentd tools`): `server/tool`, split at its first `/`, both sides not empty. `None`
/// for any other name (agentd's own tools have no `/`).
pub fn registry_tool(name: &str) -> Option<(&str, &str)> {
    let (server, tool) = name.split_once('/')?;
    (!server.is_empty() && !tool.is_empty()).then_some((server, tool))
}

/// The answer of a contract tool: the implementing tool's `CallToolResult` (`content`, and
/// `structuredContent` when the tool gave one). A result with `isError` is not an answer: the
/// call fails (`server`) with its text.
pub fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "content": {"type": "array", "items": {"type": "object"}},
            "structuredContent": {"type": "object"},
            "isError": {"const": false},
        },
        "required": ["content"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_contract_is_in_the_catalogue_with_the_reference_grants() {
        use crate::Grant::{Root, Subagent, Workflow};
        for name in TOOLS {
            let tool = crate::tool(name).expect(name);
            let want: &[crate::Grant] = match name {
                "code.run" => &[Root, Workflow],
                _ => &[Root, Workflow, Subagent],
            };
            assert_eq!(tool.grants, want, "{name}");
        }
        assert_eq!(family("knowledge.list"), Some("knowledge"));
        assert_eq!(family("exec"), None);
        assert_eq!(family("search.nope"), None);
        assert!(jsonschema::draft202012::new(&output_schema()).is_ok());
    }

    #[test]
    fn a_registry_name_is_a_server_and_a_tool() {
        assert_eq!(registry_tool("a/b/c"), Some(("a", "b/c")));
        for name in ["/b", "a/", "/", "ab", ""] {
            assert_eq!(registry_tool(name), None, "{name}");
        }
    }
}
