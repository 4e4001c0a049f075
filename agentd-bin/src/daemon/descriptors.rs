//! The daemon's file descriptor budget, held against `RLIMIT_NOFILE` at start and at each
//! reload:
//!
//! | what | descriptors |
//! |---|---|
//! | whatever the daemon serves: stdio, the store (database, WAL, shared memory), its lock and the control socket, the runtimes' pollers and wakers, the listening socket | [`BASE`] (64) |
//! | each of `mcp.servers` (at most 128): its held connection, a legacy session's GET stream or a modern listen, a pooled request's connection, MCP Events' requests | [`PER_SERVER`] (4) |
//! | the listener's connections, with `webhooks.listen` | [`CONNECTIONS`] (256) |
//!
//! A soft limit below the budget is raised, to the hard limit but at most [`RAISE_TO`]; a
//! hard limit below the budget refuses the start (or the reload) with [`Short`]. Turn
//! workers and subagents dial connections of their own on top of the budget: the room the
//! raise leaves is theirs.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

use crate::config::Config;
use crate::http::CONNECTIONS;

/// Descriptors the daemon holds whatever it serves.
pub(crate) const BASE: u64 = 64;

/// Descriptors each configured server may hold.
pub(crate) const PER_SERVER: u64 = 4;

/// The most a soft limit below the budget is raised to.
pub(crate) const RAISE_TO: u64 = 65_536;

/// The descriptors `config` may hold at once.
pub(crate) fn budget(config: &Config) -> u64 {
    let listener = if config.listen.is_some() {
        CONNECTIONS as u64
    } else {
        0
    };
    BASE + PER_SERVER * config.servers.len() as u64 + listener
}

/// The hard limit on descriptors is below the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Short {
    /// The budget.
    pub(crate) budget: u64,
    /// The hard limit (`RLIMIT_NOFILE`).
    pub(crate) hard: u64,
}

impl std::fmt::Display for Short {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} file descriptors are needed ({BASE}, {PER_SERVER} for each of mcp.servers, \
             {CONNECTIONS} for the listener) but RLIMIT_NOFILE allows {}: raise it \
             (`ulimit -n`) or configure fewer servers",
            self.budget, self.hard
        )
    }
}

impl std::error::Error for Short {}

/// The soft limit to set for `budget` under limits `soft` and `hard`: `None` when `soft`
/// holds it already.
pub(crate) fn raise(budget: u64, soft: u64, hard: u64) -> Result<Option<u64>, Short> {
    if soft >= budget {
        return Ok(None);
    }
    let to = hard.min(RAISE_TO.max(budget));
    if to < budget {
        return Err(Short { budget, hard });
    }
    Ok(Some(to))
}

/// Makes room for `budget` descriptors: the soft limit raised when it is below it.
pub(crate) fn reserve(budget: u64) -> Result<(), Short> {
    // Without the limits (not Linux, or not allowed to read them) there is nothing to hold
    // the budget against.
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return Ok(());
    };
    if let Some(to) = raise(budget, soft, hard)? {
        setrlimit(Resource::RLIMIT_NOFILE, to, hard).map_err(|_| Short { budget, hard })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The budget of one server and a listener: 64 + 4 + 256.
    #[test]
    fn the_budget_counts_servers_and_the_listener() {
        let text = "[webhooks]\nlisten = \"127.0.0.1:0\"\n\
                    [[mcp.servers]]\nname = \"a\"\nurl = \"http://x/mcp\"\n";
        let config = crate::config::parse("agentd.toml", text, &|_| None).unwrap();
        assert_eq!(budget(&config), 324);
        let config = crate::config::parse("agentd.toml", "", &|_| None).unwrap();
        assert_eq!(budget(&config), 64);
    }

    /// A soft limit at the budget stands; one below is raised when the hard limit is at the
    /// budget or past it, and refused when the hard limit is one below.
    #[test]
    fn the_limit_is_raised_to_the_budget_or_refused() {
        assert_eq!(raise(324, 324, 324), Ok(None));
        assert_eq!(raise(324, 323, 324), Ok(Some(324)));
        assert_eq!(raise(324, 323, 1 << 20), Ok(Some(RAISE_TO)));
        assert_eq!(
            raise(324, 323, 323),
            Err(Short {
                budget: 324,
                hard: 323
            })
        );
        assert_eq!(
            raise(324, 0, 0),
            Err(Short {
                budget: 324,
                hard: 0
            })
        );
    }
}
