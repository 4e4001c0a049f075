//! The text of a tool's result, as a model, a step's failure and an error's detail read it.

use mcp_wire::CallToolResult;

/// The text of `result`'s content, block after block (another kind of block as its JSON);
/// its `structuredContent` when it has no content.
pub(crate) fn said(result: &CallToolResult) -> String {
    let blocks: Vec<String> = result
        .content
        .iter()
        .map(|block| match block.as_text() {
            Some(text) => text.to_owned(),
            None => serde_json::to_string(block).unwrap_or_default(),
        })
        .collect();
    match (&result.structured_content, blocks.is_empty()) {
        (Some(structured), true) => structured.to_string(),
        _ => blocks.join("\n"),
    }
}
