//! One raw request over the 2026-07-28 transport: `server/discover`, written with mcp-wire,
//! sent with the hyper driver, its answer read as it arrives.
//!
//! ```sh
//! cargo run -p mcp-transport --example discover -- URL
//! ```

use std::process::ExitCode;

use bytes::Bytes;
use mcp_transport::driver::{Config, HttpClient, ModernTransport, Routing};
use mcp_wire::{
    ClientCapabilities, DiscoverResult, Implementation, Meta, ModernMeta, RequestId, Revision,
    encode_request,
};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: discover URL");
        return ExitCode::from(2);
    };
    match run(&url).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("discover: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let client = HttpClient::new(url, Config::default())?;
    let transport = ModernTransport::new(client, Revision::V2026_07_28);

    // Every 2026-07-28 request says who the client is in `_meta`.
    let info = Implementation::new("discover-example", env!("CARGO_PKG_VERSION"));
    let capabilities = ClientCapabilities::none();
    let mut meta = Meta::new();
    ModernMeta {
        revision: transport.revision(),
        client_info: &info,
        client_capabilities: &capabilities,
    }
    .insert_into(&mut meta);
    let params = serde_json::json!({ "_meta": meta });
    let id = RequestId::Number(0);
    let mut body = Vec::new();
    encode_request(&mut body, &id, "server/discover", Some(&params))?;

    let call = transport
        .call::<DiscoverResult>(
            id,
            "server/discover",
            Bytes::from(body),
            &Routing::default(),
        )
        .await?;
    let response = call
        .response(|notice| println!("notification {}", notice.method))
        .await?;
    match response.outcome {
        Ok(discovered) => {
            println!("revisions {}", discovered.supported_versions.join(", "));
            println!(
                "capabilities {}",
                serde_json::to_string(&discovered.capabilities)?
            );
        }
        Err(refused) => println!("refused: {refused}"),
    }
    Ok(())
}
