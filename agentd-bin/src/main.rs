//! The `agentd` binary.
//!
//! Today it prints its version and the MCP revisions its wire layer speaks; the supervisor,
//! configuration and commands are not built yet.

use mcp_wire::Revision;

fn main() {
    println!("agentd {}", env!("CARGO_PKG_VERSION"));
    println!("MCP revisions spoken by mcp-wire (oldest first):");
    for revision in Revision::ALL {
        println!("  {revision}  ({} era)", revision.era());
    }
    println!("The MCP supervisor is not built yet: there is nothing to connect to or run.");
}
