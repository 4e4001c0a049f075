//! Subscribes to a resource and prints each change until COUNT changes have come (in
//! 2026-07-28 through `subscriptions/listen`, in 2025-11-25 through `resources/subscribe`
//! and the GET stream), reading the resource again after each.
//!
//! ```sh
//! cargo run -p mcp-negotiate --example watch -- URL URI [COUNT]
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use mcp_negotiate::{Change, Client, Watch};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, uri, rest @ ..] = args.as_slice() else {
        eprintln!("usage: watch URL URI [COUNT]");
        return ExitCode::from(2);
    };
    let count = rest.first().and_then(|c| c.parse().ok()).unwrap_or(1);
    match run(url, uri, count).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("watch: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(url: &str, uri: &str, count: usize) -> Result<(), Box<dyn std::error::Error>> {
    let client = Arc::new(
        Client::builder("watch-example", env!("CARGO_PKG_VERSION"))
            .connect(url)
            .await?,
    );
    let mut watch = Watch::new(client.clone());
    watch.subscribe(uri).await?;
    println!("watching {uri} at {}", client.revision());
    let mut seen = 0;
    while seen < count {
        let Some(change) = watch.next().await? else {
            return Err("the server closed the watch".into());
        };
        if let Change::ResourceUpdated { uri: changed } = change {
            let read = client.read_resource(&changed).await?;
            println!(
                "{changed} changed: {}",
                serde_json::to_string(&read.contents)?
            );
            seen += 1;
        }
    }
    Ok(())
}
