//! `agentd events tail`: a stream of the store, printed. (`agentd events call` is
//! `agentd tool call` of an events tool: [`super::tool_call`].)

use std::process::ExitCode;

use crate::config::Config;
use crate::store::{self, Limits, Store};

/// `agentd events tail`: every record of `stream`, oldest first, one JSON line each.
pub(crate) async fn events_tail(config: &Config, stream: &str) -> ExitCode {
    match tail(config, stream).await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agentd: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints the records of `stream`, a thousand at a time; how many.
async fn tail(config: &Config, stream: &str) -> Result<usize, store::Error> {
    let store = Store::open(&config.store_path, Limits::from(config)).await?;
    let mut after = 0;
    let mut printed = 0;
    loop {
        let entries = store.read(stream, after, 1000).await?;
        let Some(last) = entries.last() else {
            store.close().await;
            return Ok(printed);
        };
        after = last.seq;
        for entry in &entries {
            crate::say!("{}", String::from_utf8_lossy(&entry.bytes));
        }
        printed += entries.len();
    }
}
