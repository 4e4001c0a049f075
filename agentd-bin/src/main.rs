//! The `agentd` binary.
//!
//! Today it runs the embedded demo (`agentd demo`) and says which MCP revisions it speaks
//! (`agentd revisions`); the supervisor and its configuration are not built yet.

mod demo;
mod log;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mcp_wire::Revision;

/// agentd, an agent daemon: its MCP client.
#[derive(Debug, Parser)]
#[command(name = "agentd", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the MCP client against an embedded reference server on loopback (one endpoint
    /// per revision): connect, call a tool, watch a resource change. Needs nothing else.
    Demo,
    /// Print the MCP revisions agentd speaks.
    Revisions,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Revisions => {
            for revision in Revision::ALL {
                println!("{revision}  ({} era)", revision.era());
            }
            ExitCode::SUCCESS
        }
        Command::Demo => {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    eprintln!("agentd: cannot start a runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match runtime.block_on(demo::run()) {
                Ok(summary) => {
                    println!("agentd demo: the MCP client against two embedded servers");
                    for line in summary {
                        println!("  {line}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("agentd demo failed: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
