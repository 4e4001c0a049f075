//! The negotiation machine: which request opens a connection, and what each answer leads to.

use std::fmt;

use mcp_wire::{
    DiscoverResult, Era, ErrorKind, ErrorObject, Implementation, InitializeResult, Revision,
    ServerCapabilities,
};

/// The request a connection sends next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// `server/discover` stating `revision`.
    Discover {
        /// The revision in `_meta` and `MCP-Protocol-Version`.
        revision: Revision,
    },
    /// `initialize` offering `revision` (no `MCP-Protocol-Version` header), then
    /// `notifications/initialized` once answered.
    Initialize {
        /// The revision offered.
        revision: Revision,
    },
}

impl Step {
    /// The JSON-RPC method of the step.
    pub fn method(&self) -> &'static str {
        match self {
            Self::Discover { .. } => mcp_wire::method::SERVER_DISCOVER,
            Self::Initialize { .. } => mcp_wire::method::INITIALIZE,
        }
    }
}

/// How a connection starts: with the probe, or the way an earlier connection to the same
/// server got there (a re-dial, or a second connection following the first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Start {
    /// `server/discover` at the newest revision known.
    Probe,
    /// As the followed connection did: its first request, at its revision.
    Like(Step),
}

/// What an opening request got, as the machine needs to know it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Reply {
    /// A `server/discover` result.
    Discovered(DiscoverResult),
    /// An `initialize` result.
    Initialized(InitializeResult),
    /// A JSON-RPC error, whatever the HTTP status.
    RpcError(ErrorObject),
    /// An HTTP failure without a JSON-RPC error body.
    Status {
        /// The status.
        status: u16,
        /// `WWW-Authenticate`, on a 401.
        www_authenticate: Option<String>,
    },
    /// `202 Accepted` to a request.
    Accepted,
    /// A 2xx whose body is no result of the expected shape (e.g. `{}`), or not JSON.
    Unreadable(String),
    /// Nothing came for the connection's timeout.
    Silent,
    /// The server could not be reached.
    Unreachable(String),
}

impl Reply {
    /// A JSON-RPC error with `code` and `data`.
    pub fn rpc_error(code: i64, data: Option<serde_json::Value>) -> Self {
        let mut e = ErrorObject::new(code, "error");
        e.data = data;
        Self::RpcError(e)
    }
}

/// Why a connection was refused: one per request that was refused.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// The request refused.
    pub step: Step,
    /// What it got.
    pub reply: Reply,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} refused: ", self.step.method())?;
        match &self.reply {
            Reply::Discovered(d) => write!(
                f,
                "no revision in common (server offers {})",
                d.supported_versions.join(", ")
            ),
            Reply::Initialized(i) => write!(f, "unknown revision {:?}", i.protocol_version),
            Reply::RpcError(e) => write!(f, "{} ({})", mcp_wire::log_text(&e.message), e.code),
            Reply::Status { status, .. } => write!(f, "HTTP {status}"),
            Reply::Accepted => f.write_str("HTTP 202 without a result"),
            Reply::Unreadable(why) => write!(f, "unreadable answer: {}", mcp_wire::log_text(why)),
            Reply::Silent => f.write_str("no answer within the timeout"),
            Reply::Unreachable(why) => write!(f, "unreachable: {}", mcp_wire::log_text(why)),
        }
    }
}

/// A negotiated connection: what the server said about itself, and how it was reached.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Connected {
    /// The revision agreed.
    pub revision: Revision,
    /// The server's capabilities.
    pub capabilities: ServerCapabilities,
    /// The server's `Implementation`, when it gave one.
    pub server_info: Option<Implementation>,
    /// The request that reached it: a re-dial starts the same way ([`Start::Like`]).
    pub reached_by: Step,
}

/// A connection that could not be negotiated: every refusal, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Failed {
    /// The refusals (two when a fallback was refused too).
    pub refusals: Vec<Refusal>,
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.refusals.iter().enumerate() {
            if i > 0 {
                f.write_str("; then ")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Failed {}

/// What to do after a reply.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Progress {
    /// Send this request next.
    Send(Step),
    /// The connection is negotiated (a legacy one still sends `notifications/initialized`).
    Connected(Connected),
    /// The connection cannot be made.
    Failed(Failed),
}

/// The negotiation machine: which request opens a connection, and what each answer leads to.
///
/// It is pure: the caller sends the [`Step`] it is given, reads the answer into a [`Reply`],
/// and hands it back with [`Negotiation::on_reply`], until the machine says
/// [`Progress::Connected`] or [`Progress::Failed`]. The rules are the reference's
/// "Negotiation" table:
///
/// | the probe (`server/discover`) got | next |
/// |---|---|
/// | a DiscoverResult listing 2026-07-28 | connected |
/// | -32022 whose `data.supported` names 2026-07-28 | ask again at that revision |
/// | -32022, or a DiscoverResult, listing only older revisions | `initialize` at the newest of them known |
/// | -32022 listing nothing | `initialize` at 2025-11-25 |
/// | -32020, -32021, 401, unreachable, or a list with nothing the client can offer | failed, naming the refusal |
/// | anything else: -32601, 403, another 4xx or 5xx, `{}`, 202, silence | `initialize` at 2025-11-25 |
///
/// And its bullets: no request is sent twice; a fallback refused too names both refusals; a
/// connection that starts with `initialize` (a re-dial of a legacy connection) and is refused
/// with a JSON-RPC error or a 4xx other than 401 probes with `server/discover` next, while a
/// 5xx, silence or an unreachable server is not probed again.
///
/// ```
/// use mcp_negotiate::{Negotiation, Progress, Reply, Start, Step};
/// use mcp_wire::Revision;
///
/// let mut n = Negotiation::new(Start::Probe);
/// assert_eq!(n.step(), Step::Discover { revision: Revision::V2026_07_28 });
/// // A server that predates server/discover answers -32601: fall back to initialize.
/// let p = n.on_reply(Reply::rpc_error(-32601, None));
/// assert_eq!(p, Progress::Send(Step::Initialize { revision: Revision::V2025_11_25 }));
/// ```
#[derive(Debug, Clone)]
pub struct Negotiation {
    step: Step,
    sent: Vec<Step>,
    /// Whether the probe was already asked again at a revision a -32022 named.
    asked_again: bool,
    refusals: Vec<Refusal>,
}

impl Negotiation {
    /// A negotiation that opens with `start`.
    pub fn new(start: Start) -> Self {
        let step = match start {
            Start::Probe => Step::Discover {
                revision: Revision::LATEST,
            },
            Start::Like(step) => step,
        };
        Self {
            step,
            sent: vec![step],
            asked_again: false,
            refusals: Vec::new(),
        }
    }

    /// The request to send now.
    pub fn step(&self) -> Step {
        self.step
    }

    /// Reads what the current request got.
    #[must_use]
    pub fn on_reply(&mut self, reply: Reply) -> Progress {
        let next = match self.step {
            Step::Discover { .. } => self.after_probe(&reply),
            Step::Initialize { .. } => self.after_initialize(&reply),
        };
        match next {
            Next::Connected(c) => Progress::Connected(c),
            Next::Refused => self.refuse(reply),
            Next::Fallback(step) => {
                self.refusals.push(Refusal {
                    step: self.step,
                    reply,
                });
                self.send(step)
            }
            // Asking again at the revision a -32022 named is a new request, once.
            Next::AskAgain(step) if !self.asked_again => {
                self.asked_again = true;
                self.refusals.push(Refusal {
                    step: self.step,
                    reply,
                });
                self.sent.push(step);
                self.step = step;
                Progress::Send(step)
            }
            Next::AskAgain(_) => self.refuse(reply),
        }
    }

    fn refuse(&mut self, reply: Reply) -> Progress {
        self.refusals.push(Refusal {
            step: self.step,
            reply,
        });
        Progress::Failed(Failed {
            refusals: std::mem::take(&mut self.refusals),
        })
    }

    /// Sends `step`, unless it was sent already: then the last refusal stands.
    fn send(&mut self, step: Step) -> Progress {
        if self.sent.contains(&step) {
            return Progress::Failed(Failed {
                refusals: std::mem::take(&mut self.refusals),
            });
        }
        self.sent.push(step);
        self.step = step;
        Progress::Send(step)
    }

    fn after_probe(&self, reply: &Reply) -> Next {
        let legacy = |versions: &[String]| {
            Revision::newest_known(versions)
                .filter(|r| r.era() == Era::Legacy)
                .map(|revision| Step::Initialize { revision })
        };
        match reply {
            Reply::Discovered(d) => match Revision::newest_known(&d.supported_versions) {
                Some(revision) if revision.era() == Era::Modern => Next::Connected(Connected {
                    revision,
                    capabilities: d.capabilities.clone(),
                    server_info: d.server_info(),
                    reached_by: self.step,
                }),
                Some(_) => legacy(&d.supported_versions).map_or(Next::Refused, Next::Fallback),
                None => Next::Refused,
            },
            Reply::RpcError(e) => match e.kind() {
                ErrorKind::UnsupportedVersion { supported, .. } => {
                    match Revision::newest_known(&supported) {
                        Some(revision) if revision.era() == Era::Modern => {
                            Next::AskAgain(Step::Discover { revision })
                        }
                        Some(_) => legacy(&supported).map_or(Next::Refused, Next::Fallback),
                        None if supported.is_empty() => Next::Fallback(INITIALIZE_LEGACY),
                        None => Next::Refused,
                    }
                }
                ErrorKind::HeaderMismatch | ErrorKind::MissingClientCapability { .. } => {
                    Next::Refused
                }
                _ => Next::Fallback(INITIALIZE_LEGACY),
            },
            Reply::Status { status: 401, .. } | Reply::Unreachable(_) => Next::Refused,
            Reply::Status { .. }
            | Reply::Accepted
            | Reply::Unreadable(_)
            | Reply::Silent
            | Reply::Initialized(_) => Next::Fallback(INITIALIZE_LEGACY),
        }
    }

    fn after_initialize(&self, reply: &Reply) -> Next {
        match reply {
            // The server may answer another revision than the one offered; any legacy one this
            // crate knows will do (a 2025-03-26 server answering a 2025-11-25 offer, say).
            Reply::Initialized(i) => match i.revision() {
                Ok(revision) if revision.era() == Era::Legacy => Next::Connected(Connected {
                    revision,
                    capabilities: i.capabilities.clone(),
                    server_info: Some(i.server_info.clone()),
                    reached_by: self.step,
                }),
                _ => Next::Refused,
            },
            // A server refusing `initialize` with a JSON-RPC error or a 4xx may have moved to
            // a newer revision: probe, unless the probe was sent already.
            Reply::RpcError(_) => Next::Fallback(PROBE),
            Reply::Status { status, .. } if (400..500).contains(status) && *status != 401 => {
                Next::Fallback(PROBE)
            }
            _ => Next::Refused,
        }
    }
}

const PROBE: Step = Step::Discover {
    revision: Revision::LATEST,
};

const INITIALIZE_LEGACY: Step = Step::Initialize {
    revision: Revision::LATEST_LEGACY,
};

enum Next {
    Connected(Connected),
    Refused,
    Fallback(Step),
    AskAgain(Step),
}
