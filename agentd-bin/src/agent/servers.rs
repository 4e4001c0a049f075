//! The supervisor's held servers, as the agent's parts reach them: the connection each
//! server's task holds, and the resource subscriptions it keeps by owner. The supervisor
//! implements [`Servers`] over its server tasks, so that the agent never names them; what
//! happens to the servers (a connection made, a resource changed) the supervisor tells each
//! part itself.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use mcp_negotiate::Client;

use crate::cause::Cause;

/// Why a server's connection is not at hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Absent {
    /// No server of that name is configured.
    Unknown,
    /// The server is configured and not connected now.
    NotConnected,
}

impl Absent {
    /// The error of a tool that needed `server`'s connection.
    pub(crate) fn into_tool(self, server: &str) -> agentd_tools::Error {
        match self {
            Self::Unknown => agentd_tools::Error::NotFound {
                what: format!("server {server:?}"),
            },
            Self::NotConnected => agentd_tools::Error::NotConnected {
                server: server.to_owned(),
            },
        }
    }
}

/// Why a subscribe or a release did not go through (yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Asked for already and not taken yet: the server's task asks again on its schedule.
    Pending,
    /// The server is no longer held.
    Gone,
    /// The server's task did not answer in time.
    Unanswered,
    /// The server refused, failed or did not answer in time: the error.
    Failed(Cause),
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pending => f.write_str("asked for; the server has not taken it yet"),
            Self::Gone => f.write_str("the server is no longer held"),
            Self::Unanswered => f.write_str("the server's task did not answer"),
            Self::Failed(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Refused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Failed(e) => Some(e.error()),
            Self::Pending | Self::Gone | Self::Unanswered => None,
        }
    }
}

/// What a subscribe or a release comes to, once tried.
pub(crate) type Answer = Pin<Box<dyn Future<Output = Result<(), Refused>> + Send>>;

/// The held servers.
pub(crate) trait Servers: fmt::Debug + Send + Sync + 'static {
    /// The connection to `server` held now.
    fn connection(&self, server: &str) -> Result<Arc<Client>, Absent>;

    /// `owner` wants `uri` of `server` subscribed: the first try's outcome. A try that
    /// failed in a way that may pass is asked for again by the server's task, and every
    /// subscription again on a new session.
    fn subscribe(&self, server: &str, uri: &str, owner: &str) -> Answer;

    /// `owner` lets `uri` of `server` go: released when no owner wants it.
    fn release(&self, server: &str, uri: &str, owner: &str) -> Answer;
}

/// No server at all: every one unknown, every subscription gone.
#[cfg(any(test, feature = "demo"))]
#[derive(Debug)]
pub(crate) struct Unheld;

#[cfg(any(test, feature = "demo"))]
impl Servers for Unheld {
    fn connection(&self, _: &str) -> Result<Arc<Client>, Absent> {
        Err(Absent::Unknown)
    }

    fn subscribe(&self, _: &str, _: &str, _: &str) -> Answer {
        Box::pin(async { Err(Refused::Gone) })
    }

    fn release(&self, _: &str, _: &str, _: &str) -> Answer {
        Box::pin(async { Err(Refused::Gone) })
    }
}
