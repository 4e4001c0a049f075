//! Polls one MCP Events binding into memory: lists the server's event types, binds one, and
//! polls on the binding's own schedule until COUNT occurrences are taken, printing each
//! record of the stream. Nothing is stored: the batch is "committed" by keeping it.
//!
//! ```sh
//! cargo run -p mcp-events --example poll -- URL TYPE [ARGUMENTS [COUNT]]
//! cargo run -p mcp-events --example poll -- http://127.0.0.1:8765/mcp ticket.created '{"project":"ops"}' 1
//! ```

use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use mcp_events::Limits;
use mcp_events::binding::{Action, Binding, Config, Failure, Listing};
use mcp_events::listing::{Lister, Step};
use mcp_negotiate::{Client, Error};
use serde_json::{Map, Value};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, event, rest @ ..] = args.as_slice() else {
        eprintln!("usage: poll URL TYPE [ARGUMENTS [COUNT]]");
        return ExitCode::from(2);
    };
    let arguments = rest.first().map_or("{}", String::as_str);
    let count = rest.get(1).and_then(|c| c.parse().ok()).unwrap_or(1);
    match run(url, event, arguments, count).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("poll: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(
    url: &str,
    event: &str,
    arguments: &str,
    count: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::builder("poll-example", env!("CARGO_PKG_VERSION"))
        .connect(url)
        .await?;
    let limits = Limits::default();

    // The server's event types, every page within the listing's bounds.
    let mut lister = Lister::new(Instant::now(), &limits);
    let types = loop {
        let now = Instant::now();
        let cursor = lister
            .poll_request(now)
            .ok_or("the listing has nothing due")?;
        match lister.on_page(client.list_events(cursor).await?, now) {
            Step::More => {}
            Step::Done(types) => break types,
            other => return Err(format!("the listing ended: {other:?}").into()),
        }
    };

    let mut config = Config::new("example", event, "memory");
    config.arguments = serde_json::from_str::<Map<String, Value>>(arguments)?;
    let mut binding = Binding::new(config, None);
    let modern = client.revision().era() == mcp_wire::Era::Modern;
    binding.on_connection(modern, client.capabilities().events().is_some());
    binding.on_listing(Listing::Types(&types), Instant::now());
    if let Some(refusal) = binding.refusal() {
        return Err(format!("the binding is refused: {refusal:?}").into());
    }

    let mut stream: Vec<Value> = Vec::new();
    let mut polls = 0;
    while stream.len() < count {
        if let Some(at) = binding.poll_timeout() {
            tokio::time::sleep_until(at.into()).await;
        }
        let now = Instant::now();
        let Some(Action::Poll(params)) = binding.poll_action(now) else {
            return Err("the binding asks for nothing to be sent".into());
        };
        let answer = client.poll_events(&params).await.map_err(|e| match e {
            Error::Rpc(e) => Failure::Rpc(e),
            other => Failure::Transport(other.to_string()),
        });
        let batch = binding.on_poll(answer, now, wall_ms(), getrandom::u32()?);
        for record in &batch.records {
            let record: Value = serde_json::from_slice(&record.bytes)?;
            println!("{}", serde_json::to_string(&record)?);
            stream.push(record);
        }
        binding.on_committed(true, Instant::now());
        polls += 1;
        if polls == 1 {
            println!("polling {event} from now");
        }
    }
    Ok(())
}

/// Milliseconds since the Unix epoch (the wall clock an occurrence's lag is measured by).
fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
