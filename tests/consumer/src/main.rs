use mcp_negotiate::Client;
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args().nth(1).ok_or("usage: mcp-consumer URL")?;
    let client = Client::builder("mcp-consumer", "0.0.0")
        .title("A consumer of mcp-negotiate")
        .connect(&url)
        .await?;
    println!("connected at {}", client.revision());
    for tool in client.catalog().tools() {
        println!("tool {}", tool.name);
    }
    let result = client.call_tool("add", json!({"a": 2, "b": 3})).await?;
    let text = result.content.first().and_then(|block| block.as_text());
    println!("add(2, 3) = {}", text.unwrap_or("?"));
    Ok(())
}
