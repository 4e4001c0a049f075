//! Connects to an MCP server in whichever revision it speaks, lists its tools, and calls one.
//!
//! ```sh
//! cargo run -p mcp-negotiate --example call_tool -- URL [TOOL [ARGUMENTS]]
//! cargo run -p mcp-negotiate --example call_tool -- http://127.0.0.1:8765/mcp add '{"a":2,"b":3}'
//! ```

use std::process::ExitCode;

use mcp_negotiate::Client;
use serde_json::Value;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, rest @ ..] = args.as_slice() else {
        eprintln!("usage: call_tool URL [TOOL [ARGUMENTS]]");
        return ExitCode::from(2);
    };
    match run(url, rest.first(), rest.get(1)).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("call_tool: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(
    url: &str,
    tool: Option<&String>,
    arguments: Option<&String>,
) -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::builder("call-tool-example", env!("CARGO_PKG_VERSION"))
        .connect(url)
        .await?;
    println!("connected at {}", client.revision());
    for tool in client.catalog().tools() {
        println!("tool {}", tool.name);
    }
    let Some(tool) = tool else {
        return Ok(());
    };
    let arguments: Value = match arguments {
        Some(text) => serde_json::from_str(text)?,
        None => Value::Null,
    };
    let result = client.call_tool(tool, arguments).await?;
    for block in &result.content {
        match block.as_text() {
            Some(text) => println!("{tool}: {text}"),
            None => println!("{tool}: {}", serde_json::to_string(block)?),
        }
    }
    if result.is_error() {
        return Err(format!("{tool} ran and failed").into());
    }
    Ok(())
}
