//! The `subscriptions/listen` of a 2026-07-28 connection, as a pure machine: one listen
//! per connection, opened afresh whenever what the connection wants changes, compared with
//! what the server acknowledges, reopened when it goes quiet or ends, and given up when the
//! server refuses it outright.
//!
//! The driver tells it what happened ([`Listener::want`], [`Listener::on_acknowledged`],
//! [`Listener::on_notification`], [`Listener::on_ended`], with the time) and asks what to do
//! ([`Listener::poll_action`], [`Listener::poll_timeout`]) and what to log
//! ([`Listener::poll_event`]). The rules are the reference's "Listens" table and
//! "Retry schedules":
//!
//! - list_changed is asked for from connect (tools, and resources when the server offers it);
//!   resource URIs are asked for only when the server advertises `resources.subscribe`, and
//!   only concrete ones (no template);
//! - widening or narrowing the filter opens a new listen, then closes the old one;
//! - URIs the acknowledgment leaves out are reported (`narrowed`) and asked for again on the
//!   listen schedule; refused list_changed flags are reported once (`flags_refused`) and the
//!   listen goes on without them;
//! - a listen quiet for 10 minutes (never less than the connection's timeout) is closed and
//!   opened again (`ended`, reason `idle`);
//! - a listen that ends otherwise, or cannot be opened, is opened again 250 ms later, doubling
//!   to 30 s (`ended` / `unavailable`, the latter logged once);
//! - a listen refused outright (-32601 or -32602) is reported once and never asked for again;
//! - after a listen is held again, every held URI is read again, since changes during the gap
//!   were not delivered.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use mcp_negotiate::listen::{Action, Interest, Listener};
//!
//! let now = Instant::now();
//! let mut listener = Listener::new(Duration::from_secs(60), true, true);
//! listener.want(Interest::default().with_uri("demo://greeting"), now);
//! let Some(Action::Open(filter)) = listener.poll_action(now) else { panic!() };
//! assert_eq!(filter.resource_subscriptions.as_deref(), Some(&["demo://greeting".to_owned()][..]));
//! assert_eq!(filter.tools_list_changed, Some(true));
//! ```

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use mcp_wire::ListenFilter;

/// The longest a listen may stay quiet before it is closed and opened again.
pub const IDLE: Duration = Duration::from_secs(600);
/// The first wait before listening again after a listen ended or could not be opened.
pub const RETRY_FIRST: Duration = Duration::from_millis(250);
/// The longest wait before listening again.
pub const RETRY_MAX: Duration = Duration::from_secs(30);

/// The resources a connection wants to hear about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interest {
    uris: BTreeSet<String>,
}

impl Interest {
    /// The same interest, with `uri` too.
    pub fn with_uri(mut self, uri: impl Into<String>) -> Self {
        self.uris.insert(uri.into());
        self
    }

    /// The URIs.
    pub fn uris(&self) -> impl Iterator<Item = &str> {
        self.uris.iter().map(String::as_str)
    }
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Action {
    /// Open a listen with this filter (and close the previous one once it is open).
    Open(ListenFilter),
    /// Close the listen (nothing is wanted any more).
    Close,
    /// Read these resources again: a listen was held again after a gap.
    ReadAgain(Vec<String>),
}

/// Why a listen ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Ended {
    /// The server ended it (a final result, `notifications/cancelled`, or the stream closed).
    ByServer,
    /// The client fell behind and dropped it.
    FellBehind,
    /// It could not be opened: the transport failed, or the server answered an error that
    /// may pass.
    Unavailable(String),
    /// The server refused it outright (-32601 or -32602): never asked for again.
    Refused(i64),
}

/// Why a held listen ended (`mcp.listen.ended`, `reason`); it is opened again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum EndReason {
    /// It stayed quiet for its idle limit (10 minutes, never less than the connection's
    /// timeout) and was closed; it is opened again at once.
    Idle,
    /// The server closed it.
    Server,
    /// The client fell behind and dropped it.
    Behind,
}

impl EndReason {
    /// Its `reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Server => "server",
            Self::Behind => "behind",
        }
    }
}

/// What to log, as the reference's "Listens" table names it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ListenEvent {
    /// `mcp.listen.ended`.
    Ended {
        /// Why.
        reason: EndReason,
        /// When the listen is opened again, in milliseconds.
        retry_ms: u64,
    },
    /// `mcp.listen.resumed`: a listen is held again.
    Resumed,
    /// `mcp.listen.narrowed`: the acknowledgment left these URIs out; asked for again.
    Narrowed {
        /// The URIs left out.
        dropped: Vec<String>,
    },
    /// `mcp.listen.unavailable`: logged once until a listen is held again.
    Unavailable {
        /// Why.
        reason: String,
        /// When the listen is tried again, in milliseconds.
        retry_ms: u64,
    },
    /// `mcp.listen.flags_refused`: the acknowledgment left out list_changed flags.
    FlagsRefused {
        /// Which.
        flags: Vec<&'static str>,
    },
    /// A listen refused outright: reported once, never asked for again.
    Refused {
        /// The JSON-RPC error code.
        code: i64,
    },
}

/// How long a listen may stay quiet on a connection whose timeout is `timeout`: [`IDLE`],
/// never less than the timeout.
pub fn idle_limit(timeout: Duration) -> Duration {
    IDLE.max(timeout)
}

/// The listen state of one connection. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Listener {
    idle: Duration,
    tools: bool,
    subscribe: bool,
    wanted: Interest,
    /// The filter of the listen held (or being opened), if any.
    held: Option<ListenFilter>,
    /// When the listen was last heard from.
    last_heard: Option<Instant>,
    /// When to open again, after an end or a failure.
    retry_at: Option<Instant>,
    backoff: Duration,
    /// A reopen after a gap reads the held URIs again once acknowledged.
    gap: bool,
    /// The URIs to read again, once a listen is held again after a gap.
    read_again: Option<Vec<String>>,
    unavailable_logged: bool,
    /// The server left the list_changed flag out: the listen goes on without it.
    flags_refused: bool,
    /// The server declared the events extension's `listChanged`: ask `eventsListChanged`.
    events_flag: bool,
    /// The server left `eventsListChanged` out.
    events_refused: bool,
    refused: bool,
    /// An open is due now (the filter changed, or the listen must come back).
    due: bool,
    events: VecDeque<ListenEvent>,
}

impl Listener {
    /// A connection's listener. `timeout` is the connection's timeout (a quiet listen is
    /// reopened after 10 minutes, never less than it); `tools` and `subscribe` say whether the
    /// server declared `tools.listChanged` and `resources.subscribe`.
    pub fn new(timeout: Duration, tools: bool, subscribe: bool) -> Self {
        Self {
            idle: idle_limit(timeout),
            tools,
            subscribe,
            wanted: Interest::default(),
            held: None,
            last_heard: None,
            retry_at: None,
            backoff: RETRY_FIRST,
            gap: false,
            read_again: None,
            unavailable_logged: false,
            flags_refused: false,
            events_flag: false,
            events_refused: false,
            refused: false,
            due: tools,
            events: VecDeque::new(),
        }
    }

    /// The same listener, asking for `notifications/events/list_changed` too (the server
    /// declared the MCP Events extension with `listChanged`).
    pub fn with_events_list_changed(mut self) -> Self {
        self.events_flag = true;
        self.due = true;
        self
    }

    /// Sets what the connection wants; a change opens a new listen. URIs are dropped when
    /// the server offers no subscriptions, and templates (anything with `{`) always.
    pub fn want(&mut self, interest: Interest, _now: Instant) {
        let uris = match self.subscribe {
            true => interest
                .uris
                .into_iter()
                .filter(|u| !u.contains('{'))
                .collect(),
            false => BTreeSet::new(),
        };
        let interest = Interest { uris };
        if interest != self.wanted {
            self.wanted = interest;
            self.due = true;
        }
    }

    /// The filter a listen asks with now.
    fn filter(&self) -> ListenFilter {
        let mut filter = ListenFilter::default();
        if self.tools && !self.flags_refused {
            filter.tools_list_changed = Some(true);
        }
        if self.events_flag && !self.events_refused {
            filter.events_list_changed = Some(true);
        }
        if !self.wanted.uris.is_empty() {
            filter.resource_subscriptions = Some(self.wanted.uris.iter().cloned().collect());
        }
        filter
    }

    fn wants_anything(&self) -> bool {
        let filter = self.filter();
        filter.tools_list_changed.is_some()
            || filter.events_list_changed.is_some()
            || filter.resource_subscriptions.is_some()
    }

    /// What to do now.
    #[must_use]
    pub fn poll_action(&mut self, now: Instant) -> Option<Action> {
        if self.refused {
            return None;
        }
        if let Some(uris) = self.read_again.take() {
            return Some(Action::ReadAgain(uris));
        }
        if let Some(at) = self.retry_at {
            if now < at {
                return None;
            }
            self.retry_at = None;
            self.due = true;
        }
        // An idle limit too far to reach is never reached.
        if let (Some(heard), Some(_)) = (self.last_heard, &self.held)
            && heard.checked_add(self.idle).is_some_and(|at| now >= at)
        {
            self.events.push_back(ListenEvent::Ended {
                reason: EndReason::Idle,
                retry_ms: 0,
            });
            self.gap = true;
            self.due = true;
        }
        if !self.due {
            return None;
        }
        self.due = false;
        if !self.wants_anything() {
            return self.held.take().map(|_| Action::Close);
        }
        let filter = self.filter();
        self.held = Some(filter.clone());
        self.last_heard = Some(now);
        Some(Action::Open(filter))
    }

    /// When [`Listener::poll_action`] should be asked again, if nothing else happens first.
    /// (After every input, ask [`Listener::poll_action`] until it returns `None`.)
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.refused {
            return None;
        }
        let idle = match (&self.held, self.last_heard) {
            (Some(_), Some(heard)) => heard.checked_add(self.idle),
            _ => None,
        };
        [self.retry_at, idle].into_iter().flatten().min()
    }

    /// Whether the server refused the listen outright: it is never asked for again.
    pub fn is_refused(&self) -> bool {
        self.refused
    }

    /// The next event to log.
    pub fn poll_event(&mut self) -> Option<ListenEvent> {
        self.events.pop_front()
    }

    /// The server acknowledged the listen with `agreed`.
    pub fn on_acknowledged(&mut self, agreed: &ListenFilter, now: Instant) {
        self.last_heard = Some(now);
        let asked = self.held.clone().unwrap_or_default();
        let granted: Vec<String> = agreed.resource_subscriptions.clone().unwrap_or_default();
        let dropped: Vec<String> = asked
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|u| !granted.contains(u))
            .cloned()
            .collect();
        let mut flags = Vec::new();
        if asked.tools_list_changed == Some(true) && agreed.tools_list_changed != Some(true) {
            self.flags_refused = true;
            flags.push("toolsListChanged");
        }
        if asked.events_list_changed == Some(true) && agreed.events_list_changed != Some(true) {
            self.events_refused = true;
            flags.push("eventsListChanged");
        }
        if !flags.is_empty() {
            self.events.push_back(ListenEvent::FlagsRefused { flags });
        }
        if std::mem::take(&mut self.gap) {
            self.unavailable_logged = false;
            self.events.push_back(ListenEvent::Resumed);
            if !granted.is_empty() {
                self.read_again = Some(granted);
            }
        }
        match dropped.is_empty() {
            true => self.backoff = RETRY_FIRST,
            false => {
                self.events.push_back(ListenEvent::Narrowed { dropped });
                self.retry_at = Some(now + self.backoff);
                self.backoff = (self.backoff * 2).min(RETRY_MAX);
            }
        }
    }

    /// A notification arrived on the listen.
    pub fn on_notification(&mut self, now: Instant) {
        self.last_heard = Some(now);
    }

    /// The listen ended (or could not be opened) at `now`.
    pub fn on_ended(&mut self, why: Ended, now: Instant) {
        self.held = None;
        self.last_heard = None;
        let retry_ms = u64::try_from(self.backoff.as_millis()).unwrap_or(u64::MAX);
        match why {
            Ended::Refused(code) => {
                self.refused = true;
                self.events.push_back(ListenEvent::Refused { code });
                return;
            }
            Ended::ByServer => self.events.push_back(ListenEvent::Ended {
                reason: EndReason::Server,
                retry_ms,
            }),
            Ended::FellBehind => self.events.push_back(ListenEvent::Ended {
                reason: EndReason::Behind,
                retry_ms,
            }),
            Ended::Unavailable(reason) => {
                if !std::mem::replace(&mut self.unavailable_logged, true) {
                    self.events
                        .push_back(ListenEvent::Unavailable { reason, retry_ms });
                }
            }
        }
        self.gap = true;
        self.retry_at = Some(now + self.backoff);
        self.backoff = (self.backoff * 2).min(RETRY_MAX);
    }
}
