//! What went wrong at the store's boundary, in the contract's words.

use std::fmt;
use std::path::PathBuf;

use mcp_events::store::StoreError;

/// What went wrong at the store's boundary. [`Error::code`] is the contract's word for it.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum Error {
    /// The store's thread has ended (closed, or gone): the request was not made.
    Closed,
    /// The store's directory could not be made.
    Dir {
        /// The directory (`store.path`).
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The store's thread could not be started.
    Thread(std::io::Error),
    /// SQLite failed opening or migrating the database file (one that is not a database,
    /// one another process holds locked); the file is left as it is.
    Open {
        /// The file (`<store.path>/agentd.sqlite3`).
        path: PathBuf,
        /// Why.
        source: rusqlite::Error,
    },
    /// SQLite failed a request.
    Sqlite(rusqlite::Error),
    /// The database's schema is of a version this build does not know (a later one's).
    Version {
        /// Its `user_version`.
        found: i64,
        /// The latest version this build knows.
        known: usize,
    },
    /// The store failed a request of MCP Events (or opening the migrated file).
    Store(StoreError),
    /// A value kept in the database is not the JSON it should be.
    Corrupt(serde_json::Error),
    /// A memory key is not 1..=256 bytes of UTF-8 without control characters.
    BadKey {
        /// The rule it breaks.
        rule: &'static str,
    },
    /// An argument breaks one of the contract's rules other than a key's or a size's.
    Invalid {
        /// Where, as a JSON pointer into the tool's arguments (`/limit`, `/steps/3/title`).
        pointer: String,
        /// The rule.
        rule: String,
    },
    /// Content past its bound in bytes; nothing was written.
    TooLarge {
        /// What (`value`, `content`, `text`, `summary`).
        what: &'static str,
        /// Its size.
        bytes: usize,
        /// The bound.
        limit: usize,
    },
    /// A compare-and-set expected another version; nothing was written.
    VersionMismatch {
        /// The key's version now (0: absent).
        current: u64,
    },
    /// A push, shift or pop on a key whose value is not an array.
    NotAnArray,
    /// What is to be created exists already (a unit's plan, a question's id).
    Exists {
        /// What.
        what: &'static str,
    },
    /// What the request names does not exist (an artifact, a unit's plan, an open question).
    NotFound {
        /// What.
        what: &'static str,
    },
    /// No subagent has that id, or it was retired.
    UnknownSubagent,
    /// The subagent runs: it must settle first.
    Running,
    /// One more would be past the bound of how many there may be.
    TooMany {
        /// Of what (`running subagents`).
        what: &'static str,
        /// How many there would be.
        count: usize,
        /// The bound.
        limit: usize,
    },
    /// The unit was finished already.
    AlreadyFinished {
        /// The unit.
        unit: String,
    },
    /// An answer that does not fit its question's schema; the question stays open.
    BadAnswer {
        /// The JSON pointer of the value that failed, inside the answer.
        pointer: String,
        /// The rule it broke (a JSON Schema keyword).
        rule: String,
        /// What is wrong, in words.
        message: String,
    },
}

impl Error {
    /// The contract's stable code word for this error (`store` for the store's own failures).
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::BadKey { .. } => "bad_key",
            Self::Invalid { .. } => "invalid_arguments",
            Self::TooLarge { .. } => "too_large",
            Self::VersionMismatch { .. } => "version_mismatch",
            Self::NotAnArray => "not_an_array",
            Self::Exists { .. } => "exists",
            Self::NotFound { .. } => "not_found",
            Self::AlreadyFinished { .. } => "already_finished",
            Self::UnknownSubagent => "unknown_subagent",
            Self::Running => "running",
            Self::TooMany { .. } => "too_large",
            Self::BadAnswer { .. } => "bad_answer",
            Self::Closed
            | Self::Dir { .. }
            | Self::Thread(_)
            | Self::Open { .. }
            | Self::Sqlite(_)
            | Self::Version { .. }
            | Self::Store(_)
            | Self::Corrupt(_) => "store",
        }
    }

    /// The error as agentd's own tools say it, of a request `tool` made about `key` (a
    /// memory key or a subagent's id, for the errors that name one): every kind has its counterpart; a closed
    /// store means the daemon is shutting down.
    pub(crate) fn into_tool(self, tool: &str, key: &str) -> agentd_tools::Error {
        use agentd_tools::Error as T;
        match self {
            Self::Closed => T::ShuttingDown,
            Self::Dir { .. }
            | Self::Thread(_)
            | Self::Open { .. }
            | Self::Sqlite(_)
            | Self::Version { .. }
            | Self::Store(_)
            | Self::Corrupt(_) => T::Store {
                detail: self.to_string(),
            },
            Self::BadKey { rule } => T::BadKey { reason: rule },
            Self::Invalid { pointer, rule } => T::InvalidArguments {
                tool: tool.to_owned(),
                pointer,
                message: rule.clone(),
                rule,
            },
            Self::TooLarge { what, bytes, limit } => T::TooLarge {
                what,
                size: bytes,
                max: limit,
            },
            Self::VersionMismatch { current } => T::VersionMismatch {
                key: key.to_owned(),
                current,
            },
            Self::NotAnArray => T::NotAnArray {
                key: key.to_owned(),
            },
            Self::Exists { what } => T::Exists {
                what: what.to_owned(),
            },
            Self::NotFound { what } => T::NotFound {
                what: what.to_owned(),
            },
            Self::AlreadyFinished { unit } => T::AlreadyFinished { unit },
            Self::UnknownSubagent => T::UnknownSubagent {
                subagent: key.to_owned(),
            },
            Self::Running => T::Running {
                subagent: key.to_owned(),
            },
            Self::TooMany { what, count, limit } => T::TooLarge {
                what,
                size: count,
                max: limit,
            },
            Self::BadAnswer {
                pointer,
                rule,
                message,
            } => T::BadAnswer {
                pointer,
                rule,
                message,
            },
        }
    }

    /// `Invalid` at `pointer`.
    pub(super) fn invalid(pointer: impl Into<String>, rule: impl Into<String>) -> Self {
        Self::Invalid {
            pointer: pointer.into(),
            rule: rule.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed => f.write_str("store: closed"),
            Self::Dir { path, source } => write!(f, "store: {}: {source}", path.display()),
            Self::Thread(e) => write!(f, "store: its thread: {e}"),
            Self::Open { path, source } => write!(f, "store: {}: {source}", path.display()),
            Self::Sqlite(e) => write!(f, "store: {e}"),
            Self::Version { found, known } => write!(
                f,
                "store: the database's schema is version {found}, this build knows up to \
                 {known}: it was made by a later agentd"
            ),
            // Already `store: …`.
            Self::Store(e) => e.fmt(f),
            Self::Corrupt(e) => write!(f, "store: a kept value is not JSON: {e}"),
            Self::BadKey { rule } => write!(f, "bad key: {rule}"),
            Self::Invalid { pointer, rule } => write!(f, "invalid arguments: {pointer}: {rule}"),
            Self::TooLarge { what, bytes, limit } => {
                write!(f, "too large: the {what} is {bytes} bytes, at most {limit}")
            }
            Self::VersionMismatch { current } => {
                write!(f, "version mismatch: the current version is {current}")
            }
            Self::NotAnArray => f.write_str("not an array: the key's value is not a JSON array"),
            Self::Exists { what } => write!(f, "exists: the {what} exists already"),
            Self::NotFound { what } => write!(f, "not found: no such {what}"),
            Self::AlreadyFinished { unit } => write!(f, "already finished: {unit}"),
            Self::UnknownSubagent => f.write_str("unknown subagent: none of that id, or retired"),
            Self::Running => f.write_str("running: the subagent must settle first"),
            Self::TooMany { what, count, limit } => {
                write!(f, "too many: {count} {what}, at most {limit}")
            }
            Self::BadAnswer {
                pointer,
                rule,
                message,
            } => write!(f, "bad answer: at {pointer:?} it breaks {rule}: {message}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Dir { source, .. } | Self::Thread(source) => Some(source),
            Self::Open { source, .. } | Self::Sqlite(source) => Some(source),
            Self::Store(e) => Some(e),
            Self::Corrupt(e) => Some(e),
            _ => None,
        }
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Self::Sqlite(e)
    }
}
