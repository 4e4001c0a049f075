//! The daemon's file descriptor budget, held against `RLIMIT_NOFILE` at start and at each
//! reload:
//!
//! | what | descriptors |
//! |---|---|
//! | whatever the daemon serves: stdio, the store (database, WAL, shared memory), its lock and the control socket, the runtimes' pollers and wakers, the listening socket | [`BASE`] (64) |
//! | each of `mcp.servers` (at most 128): its held connection, a legacy session's GET stream or a modern listen, a pooled request's connection, MCP Events' requests | [`PER_SERVER`] (4) |
//! | the listener's connections, with `webhooks.listen` | [`CONNECTIONS`] (256) |
//! | each `exec` call running, with `security.exec.enabled` (at most `concurrency`): its pipes and its wait | [`PER_EXEC`] (4) |
//!
//! A soft limit below the budget is raised, to the hard limit but at most [`RAISE_TO`]; a
//! hard limit below the budget refuses the start (or the reload) with [`Error::Short`], and so does a raise that fails
//! ([`Error::NotRaised`]). Turn
//! workers and subagents dial connections of their own on top of the budget: the room the
//! raise leaves is theirs. `exec`'s commands do not inherit the raise: each is given back
//! the soft limit the daemon started with.

use nix::errno::Errno;
use nix::sys::resource::{Resource, getrlimit, setrlimit};

use crate::config::Config;
use crate::http::CONNECTIONS;

/// Descriptors the daemon holds whatever it serves.
pub(crate) const BASE: u64 = 64;

/// Descriptors each configured server may hold.
pub(crate) const PER_SERVER: u64 = 4;

/// Descriptors each running `exec` call may hold.
pub(crate) const PER_EXEC: u64 = 4;

/// The most a soft limit below the budget is raised to.
pub(crate) const RAISE_TO: u64 = 65_536;

/// The descriptors `config` may hold at once.
pub(crate) fn budget(config: &Config) -> u64 {
    let listener = if config.listen.is_some() {
        CONNECTIONS as u64
    } else {
        0
    };
    let exec = config
        .exec
        .as_ref()
        .map_or(0, |e| PER_EXEC * e.concurrency as u64);
    BASE + PER_SERVER * config.servers.len() as u64 + listener + exec
}

/// Why the descriptor budget cannot be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Error {
    /// The hard limit is below the budget.
    Short {
        /// The budget.
        budget: u64,
        /// The hard limit (`RLIMIT_NOFILE`).
        hard: u64,
    },
    /// The soft limit is below the budget, and the hard one holds it, but raising the soft
    /// limit failed.
    NotRaised {
        /// The budget.
        budget: u64,
        /// The soft limit, left as it was.
        soft: u64,
        /// What it was to be raised to.
        to: u64,
        /// Why `setrlimit` failed.
        errno: Errno,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Short { budget, hard } => write!(
                f,
                "{budget} file descriptors are needed ({BASE}, {PER_SERVER} for each of \
                 mcp.servers, {CONNECTIONS} for the listener) but RLIMIT_NOFILE allows \
                 {hard}: raise it (`ulimit -n`) or configure fewer servers"
            ),
            Self::NotRaised {
                budget,
                soft,
                to,
                errno,
            } => write!(
                f,
                "{budget} file descriptors are needed but the soft RLIMIT_NOFILE of {soft} \
                 could not be raised to {to}: {}: raise it (`ulimit -Sn`) before the start",
                errno.desc()
            ),
        }
    }
}

impl std::error::Error for Error {}

/// The soft limit to set for `budget` under limits `soft` and `hard`: `None` when `soft`
/// holds it already.
pub(crate) fn raise(budget: u64, soft: u64, hard: u64) -> Result<Option<u64>, Error> {
    if soft >= budget {
        return Ok(None);
    }
    let to = hard.min(RAISE_TO.max(budget));
    if to < budget {
        return Err(Error::Short { budget, hard });
    }
    Ok(Some(to))
}

/// Makes room for `budget` descriptors: the soft limit raised when it is below it. Returns
/// the soft limit as it was before (`None` when it cannot be read): what the daemon started
/// with, at the start, which `exec`'s commands are given back.
pub(crate) fn reserve(budget: u64) -> Result<Option<u64>, Error> {
    // Without the limits (not Linux, or not allowed to read them) there is nothing to hold
    // the budget against.
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return Ok(None);
    };
    reserve_under(budget, soft, hard, |soft, hard| {
        setrlimit(Resource::RLIMIT_NOFILE, soft, hard)
    })?;
    Ok(Some(soft))
}

/// [`reserve`] under limits `soft` and `hard`, setting them with `set`.
fn reserve_under(
    budget: u64,
    soft: u64,
    hard: u64,
    set: impl FnOnce(u64, u64) -> nix::Result<()>,
) -> Result<(), Error> {
    if let Some(to) = raise(budget, soft, hard)? {
        set(to, hard).map_err(|errno| Error::NotRaised {
            budget,
            soft,
            to,
            errno,
        })?;
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
        if cfg!(feature = "exec") {
            let text = "[security.exec]\nenabled = true\nconcurrency = 8\n";
            let config = crate::config::parse("agentd.toml", text, &|_| None).unwrap();
            assert_eq!(budget(&config), 64 + 32);
        }
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
            Err(Error::Short {
                budget: 324,
                hard: 323
            })
        );
        assert_eq!(
            raise(324, 0, 0),
            Err(Error::Short {
                budget: 324,
                hard: 0
            })
        );
    }

    /// A raise that fails is told as such, with the limit it left and the one it was to
    /// set, not as a hard limit below the budget; a limit that holds the budget sets nothing.
    #[test]
    fn a_raise_that_fails_is_told_apart_from_a_short_limit() {
        let refused = |_, _| Err(Errno::EPERM);
        let e = reserve_under(324, 100, 1 << 20, refused).unwrap_err();
        assert_eq!(
            e,
            Error::NotRaised {
                budget: 324,
                soft: 100,
                to: RAISE_TO,
                errno: Errno::EPERM
            }
        );
        assert_eq!(
            e.to_string(),
            "324 file descriptors are needed but the soft RLIMIT_NOFILE of 100 could not be \
             raised to 65536: Operation not permitted: raise it (`ulimit -Sn`) before the start"
        );
        assert_eq!(reserve_under(324, 324, 324, refused), Ok(()));
        let mut set = None;
        let raised = reserve_under(324, 100, 400, |soft, hard| {
            set = Some((soft, hard));
            Ok(())
        });
        assert_eq!((raised, set), (Ok(()), Some((400, 400))));
    }
}
