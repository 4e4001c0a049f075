//! Writes a `tools/call` request, then reads a server's answer to it and a progress
//! notification: the codec of `mcp-wire`, with no IO.
//!
//! ```sh
//! cargo run -p mcp-wire --example codec
//! ```

use mcp_wire::{
    CallToolParams, CallToolResult, Message, Outcome, RequestId, ServerNotification, decode,
    encode_request,
};

/// The largest message this program reads.
const LIMIT: usize = 1 << 20;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut params = CallToolParams::new("add");
    params.arguments = serde_json::json!({"a": 2, "b": 3}).as_object().cloned();
    let mut request = Vec::new();
    encode_request(
        &mut request,
        &RequestId::Number(7),
        "tools/call",
        Some(&params),
    )?;
    println!("sent     {}", String::from_utf8(request)?);

    let answer = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"5"}]}}"#;
    let Message::Response(response) = decode(answer, LIMIT)? else {
        return Err("a response was expected".into());
    };
    match response.result_as::<Outcome<CallToolResult>>()? {
        Ok(Outcome::Complete(result)) => {
            println!(
                "received {:?} for id {:?}",
                result.content[0].as_text(),
                response.id
            );
        }
        Ok(Outcome::InputRequired(asked)) => println!("the server asks for input: {asked:?}"),
        Err(error) => println!("the server refused: {error}"),
    }

    let progress = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1,"total":2}}"#;
    let Message::Notification(notification) = decode(progress, LIMIT)? else {
        return Err("a notification was expected".into());
    };
    match ServerNotification::decode(&notification)? {
        ServerNotification::Progress(p) => println!("progress {} of {:?}", p.progress, p.total),
        other => println!("notification {other:?}"),
    }
    Ok(())
}
