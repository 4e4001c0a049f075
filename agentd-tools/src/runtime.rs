//! Runtime subscriptions: what `events.subscribe`, `events.unsubscribe` and
//! `events.subscriptions` ([`events`](crate::events)) do, as a pure registry, and agentd's
//! bounds on them.
//!
//! A grant allows its owner 1 to 64 live subscriptions (8 when it says nothing); each lives
//! at most 30 days (1 day when it says nothing); its arguments are at most 4 KiB serialized;
//! a server holds at most 64 bindings and subscriptions, the instance 256; none appends into
//! agentd's audit stream ([`AUDIT_STREAM`]). The registry is kept in the store as its
//! [`Registry::index`], saved after every change with the audit record of the change
//! ([`Subscription::audit`]).
//!
//! ```
//! use agentd_tools::runtime::{Grant, Registry, Wanted};
//!
//! let mut registry = Registry::default();
//! let grant = Grant::new("root", None).unwrap();
//! let wanted = Wanted::new("tickets", "ticket.created", "inbox");
//! let made = registry.subscribe(&grant, wanted, 0, 0, 0).unwrap();
//! assert_eq!(registry.subscriptions("root").len(), 1);
//! registry.unsubscribe("root", &made.id).unwrap();
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use mcp_wire::events::DeliveryMode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use mcp_events::binding::{Refusal, key_of};

/// Bindings per server, configured and runtime together.
pub const BINDINGS_PER_SERVER: usize = 64;
/// Bindings and subscriptions per instance.
pub const BINDINGS_PER_INSTANCE: usize = 256;
/// Live runtime subscriptions a grant allows: at most this.
pub const GRANT_MAX: u32 = 64;
/// Live runtime subscriptions a grant allows when it says nothing.
pub const GRANT_DEFAULT: u32 = 8;
/// A tool-made subscription's lifetime: at most this.
pub const LIFETIME_MAX: Duration = Duration::from_secs(30 * 24 * 3600);
/// A tool-made subscription's lifetime when it says nothing.
pub const LIFETIME_DEFAULT: Duration = Duration::from_secs(24 * 3600);
/// Runtime subscription arguments, serialized.
pub const ARGUMENTS_MAX: usize = 4 * 1024;
/// The stream the audit records of runtime subscriptions are appended to; no binding or
/// subscription may append into it.
pub const AUDIT_STREAM: &str = "agentd.audit";

/// What a grant allows its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    owner: String,
    live: u32,
}

impl Grant {
    /// A grant to `owner` of `live` subscriptions at once (1 to 64; 8 when `None`).
    pub fn new(owner: &str, live: Option<u32>) -> Result<Self, Refused> {
        let live = live.unwrap_or(GRANT_DEFAULT);
        if !(1..=GRANT_MAX).contains(&live) {
            return Err(Refused::Grant { live });
        }
        Ok(Self {
            owner: owner.to_owned(),
            live,
        })
    }

    /// How many live subscriptions it allows.
    pub fn live(&self) -> usize {
        self.live as usize
    }
}

/// A subscription asked for.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Wanted {
    /// The server, by its configured name.
    pub server: String,
    /// The event type.
    pub event: String,
    /// The stream its occurrences go to.
    pub into: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
    /// The modes, in order of preference.
    pub delivery: Vec<DeliveryMode>,
    /// How long it lives (`None`: a day).
    pub lifetime: Option<Duration>,
}

impl Wanted {
    /// A poll subscription of `event` on `server` into `into`, without arguments, for a day.
    pub fn new(server: &str, event: &str, into: &str) -> Self {
        Self {
            server: server.to_owned(),
            event: event.to_owned(),
            into: into.to_owned(),
            arguments: Map::new(),
            delivery: vec![DeliveryMode::Poll],
            lifetime: None,
        }
    }
}

/// A live runtime subscription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Subscription {
    /// Its key (the binding's).
    pub id: String,
    /// Who made it.
    pub owner: String,
    /// The server.
    pub server: String,
    /// The event type.
    pub event: String,
    /// The stream.
    pub into: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
    /// The modes, by name.
    pub delivery: Vec<String>,
    /// When it ends, in Unix milliseconds.
    pub expires_ms: i64,
}

/// Why a subscription was not made or found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refused {
    /// A grant must allow 1 to 64.
    Grant {
        /// What it asked for.
        live: u32,
    },
    /// The owner's grant is spent.
    GrantSpent {
        /// What it allows.
        live: u32,
    },
    /// A lifetime past 30 days, or of nothing.
    Lifetime,
    /// Arguments past 4 KiB serialized.
    Arguments {
        /// Their size.
        size: usize,
    },
    /// The server holds 64 bindings and subscriptions already.
    ServerFull,
    /// The instance holds 256 already.
    InstanceFull,
    /// The same subscription is live already.
    Exists,
    /// No such subscription of this owner.
    NotFound,
    /// The stream is agentd's own ([`AUDIT_STREAM`]).
    ReservedStream,
    /// The owner holds no grant.
    NoGrant {
        /// The owner.
        owner: String,
    },
    /// No server of that name is configured.
    UnknownServer {
        /// The name asked for.
        server: String,
    },
    /// The server is configured but not connected now.
    NotConnected {
        /// The server.
        server: String,
    },
    /// The binding could not work, for a reason of the refusals table.
    Unusable {
        /// Its reason.
        reason: Refusal,
        /// What the server or the schema said, cut to 200 bytes.
        detail: String,
    },
    /// An `events/*` request failed (transport, status, timeout); it may pass.
    Failed {
        /// How.
        err: String,
    },
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Grant { live } => write!(f, "a grant allows 1 to 64 subscriptions, not {live}"),
            Self::GrantSpent { live } => write!(f, "the grant's {live} subscriptions are live"),
            Self::Lifetime => f.write_str("a lifetime is more than 0 and at most 30 days"),
            Self::Arguments { size } => {
                write!(f, "arguments of {size} bytes are past 4096")
            }
            Self::ServerFull => f.write_str("the server holds 64 bindings and subscriptions"),
            Self::InstanceFull => f.write_str("the instance holds 256 bindings and subscriptions"),
            Self::Exists => f.write_str("the same subscription is live"),
            Self::NotFound => f.write_str("no such subscription"),
            Self::ReservedStream => write!(f, "the stream {AUDIT_STREAM} is agentd's own"),
            Self::NoGrant { owner } => write!(f, "{owner:?} holds no events grant"),
            Self::UnknownServer { server } => write!(f, "no server is named {server:?}"),
            Self::NotConnected { server } => write!(f, "{server} is not connected"),
            Self::Unusable { reason, detail } if detail.is_empty() => {
                write!(f, "refused: {}", reason.as_str())
            }
            Self::Unusable { reason, detail } => {
                write!(f, "refused: {}: {detail}", reason.as_str())
            }
            Self::Failed { err } => write!(f, "events request failed: {err}"),
        }
    }
}

impl std::error::Error for Refused {}

/// The live runtime subscriptions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Registry {
    live: BTreeMap<String, Subscription>,
}

impl Registry {
    /// Makes a subscription for `grant`'s owner at `now_ms` (Unix milliseconds), with
    /// `configured_on_server` configured bindings on its server and `configured` in all.
    pub fn subscribe(
        &mut self,
        grant: &Grant,
        wanted: Wanted,
        configured_on_server: usize,
        configured: usize,
        now_ms: i64,
    ) -> Result<Subscription, Refused> {
        let lifetime = wanted.lifetime.unwrap_or(LIFETIME_DEFAULT);
        if lifetime.is_zero() || lifetime > LIFETIME_MAX {
            return Err(Refused::Lifetime);
        }
        if wanted.into == AUDIT_STREAM {
            return Err(Refused::ReservedStream);
        }
        let size = Value::Object(wanted.arguments.clone()).to_string().len();
        if size > ARGUMENTS_MAX {
            return Err(Refused::Arguments { size });
        }
        let owned = self.subscriptions(&grant.owner).len();
        if owned >= grant.live as usize {
            return Err(Refused::GrantSpent { live: grant.live });
        }
        let on_server = self
            .live
            .values()
            .filter(|s| s.server == wanted.server)
            .count();
        if configured_on_server + on_server >= BINDINGS_PER_SERVER {
            return Err(Refused::ServerFull);
        }
        if configured + self.live.len() >= BINDINGS_PER_INSTANCE {
            return Err(Refused::InstanceFull);
        }
        let id = key_of(
            &wanted.server,
            &wanted.event,
            &wanted.into,
            &wanted.arguments,
        );
        if self.live.contains_key(&id) {
            return Err(Refused::Exists);
        }
        let lifetime_ms = i64::try_from(lifetime.as_millis()).unwrap_or(i64::MAX);
        let made = Subscription {
            id: id.clone(),
            owner: grant.owner.clone(),
            server: wanted.server,
            event: wanted.event,
            into: wanted.into,
            arguments: wanted.arguments,
            delivery: wanted
                .delivery
                .iter()
                .map(|m| m.as_str().to_owned())
                .collect(),
            expires_ms: now_ms.saturating_add(lifetime_ms),
        };
        self.live.insert(id, made.clone());
        Ok(made)
    }

    /// Ends `owner`'s subscription `id`.
    pub fn unsubscribe(&mut self, owner: &str, id: &str) -> Result<Subscription, Refused> {
        match self.live.get(id) {
            Some(s) if s.owner == owner => Ok(self.live.remove(id).expect("present")),
            _ => Err(Refused::NotFound),
        }
    }

    /// `owner`'s live subscriptions.
    pub fn subscriptions(&self, owner: &str) -> Vec<&Subscription> {
        self.live.values().filter(|s| s.owner == owner).collect()
    }

    /// Every live subscription.
    pub fn all(&self) -> impl Iterator<Item = &Subscription> {
        self.live.values()
    }

    /// Ends every subscription whose lifetime is over at `now_ms`; those ended.
    pub fn expire(&mut self, now_ms: i64) -> Vec<Subscription> {
        self.end_where(|s| s.expires_ms <= now_ms)
    }

    /// Ends every subscription `over` says is over; those ended.
    pub fn end_where(&mut self, over: impl Fn(&Subscription) -> bool) -> Vec<Subscription> {
        let ids: Vec<String> = self
            .live
            .values()
            .filter(|s| over(s))
            .map(|s| s.id.clone())
            .collect();
        ids.iter().filter_map(|id| self.live.remove(id)).collect()
    }

    /// The live subscription `id`, if it is one.
    pub fn get(&self, id: &str) -> Option<&Subscription> {
        self.live.get(id)
    }

    /// Ends the subscriptions past a limit that changed since they were made (a grant's
    /// `live_of` its owner, `configured_on` a server and `configured` in all), keeping the
    /// first in key order; those ended.
    pub fn end_excess(
        &mut self,
        live_of: impl Fn(&str) -> usize,
        configured_on: impl Fn(&str) -> usize,
        configured: usize,
    ) -> Vec<Subscription> {
        let (mut owners, mut servers) = (BTreeMap::<&str, usize>::new(), BTreeMap::new());
        let mut total = configured;
        let mut over = Vec::new();
        for s in self.live.values() {
            let owned = owners.entry(&s.owner).or_default();
            let on_server = servers
                .entry(&s.server)
                .or_insert_with(|| configured_on(&s.server));
            if *owned >= live_of(&s.owner)
                || *on_server >= BINDINGS_PER_SERVER
                || total >= BINDINGS_PER_INSTANCE
            {
                over.push(s.id.clone());
            } else {
                *owned += 1;
                *on_server += 1;
                total += 1;
            }
        }
        over.iter().filter_map(|id| self.live.remove(id)).collect()
    }

    /// When the next lifetime ends, in Unix milliseconds.
    pub fn next_expiry(&self) -> Option<i64> {
        self.live.values().map(|s| s.expires_ms).min()
    }

    /// The index kept in the store: every live subscription, as JSON.
    pub fn index(&self) -> String {
        let all: Vec<&Subscription> = self.live.values().collect();
        serde_json::to_string(&all).unwrap_or_else(|_| "[]".to_owned())
    }

    /// The registry an index holds; `None` when it is not one.
    pub fn from_index(index: &str) -> Option<Self> {
        let all: Vec<Subscription> = serde_json::from_str(index).ok()?;
        Some(Self {
            live: all.into_iter().map(|s| (s.id.clone(), s)).collect(),
        })
    }
}

impl Subscription {
    /// Its audit record: what happened to it (`subscribed` or `unsubscribed`), why, and
    /// when (`at_ms`, Unix milliseconds), as one JSON object.
    pub fn audit(&self, action: &str, reason: &str, at_ms: i64) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "at_ms": at_ms,
            "action": action,
            "reason": reason,
            "subscription": self,
        }))
        .unwrap_or_default()
    }

    /// Its modes, in order of preference (names no longer known are passed over).
    pub fn modes(&self) -> Vec<DeliveryMode> {
        self.delivery
            .iter()
            .filter_map(|m| DeliveryMode::parse(m))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn wanted(n: usize) -> Wanted {
        Wanted::new("s", &format!("e{n}"), "in")
    }

    #[test]
    fn grants_allow_1_to_64_and_8_by_default() {
        assert_eq!(Grant::new("a", Some(0)), Err(Refused::Grant { live: 0 }));
        assert!(Grant::new("a", Some(1)).is_ok());
        assert!(Grant::new("a", Some(64)).is_ok());
        assert_eq!(Grant::new("a", Some(65)), Err(Refused::Grant { live: 65 }));
        let grant = Grant::new("a", None).unwrap();
        let mut r = Registry::default();
        for n in 0..8 {
            r.subscribe(&grant, wanted(n), 0, 0, 0).unwrap();
        }
        assert_eq!(
            r.subscribe(&grant, wanted(8), 0, 0, 0),
            Err(Refused::GrantSpent { live: 8 })
        );
        // Another owner has a grant of its own.
        let other = Grant::new("b", Some(1)).unwrap();
        assert!(r.subscribe(&other, wanted(9), 0, 0, 0).is_ok());
    }

    #[test]
    fn lifetimes_are_at_most_30_days_and_a_day_by_default() {
        let grant = Grant::new("a", Some(64)).unwrap();
        let mut r = Registry::default();
        let day = r.subscribe(&grant, wanted(0), 0, 0, 1000).unwrap();
        assert_eq!(day.expires_ms, 1000 + 86_400_000);
        let mut w = wanted(1);
        w.lifetime = Some(LIFETIME_MAX);
        assert!(r.subscribe(&grant, w, 0, 0, 0).is_ok());
        let mut w = wanted(2);
        w.lifetime = Some(LIFETIME_MAX + Duration::from_millis(1));
        assert_eq!(r.subscribe(&grant, w, 0, 0, 0), Err(Refused::Lifetime));
        let mut w = wanted(3);
        w.lifetime = Some(Duration::ZERO);
        assert_eq!(r.subscribe(&grant, w, 0, 0, 0), Err(Refused::Lifetime));
        let ended = r.expire(1000 + 86_400_000);
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].id, day.id);
        assert_eq!(r.next_expiry(), Some(LIFETIME_MAX.as_millis() as i64));
        assert_eq!(r.subscriptions("a").len(), 1);
    }

    #[test]
    fn arguments_are_at_most_4_kib_serialized() {
        let grant = Grant::new("a", Some(64)).unwrap();
        let mut r = Registry::default();
        // {"k":"…"} is 8 bytes around the value.
        let sized = |n: usize| {
            let mut w = wanted(n);
            w.arguments = json!({"k": "x".repeat(n - 8)}).as_object().unwrap().clone();
            w
        };
        assert!(r.subscribe(&grant, sized(4096), 0, 0, 0).is_ok());
        assert_eq!(
            r.subscribe(&grant, sized(4097), 0, 0, 0),
            Err(Refused::Arguments { size: 4097 })
        );
    }

    #[test]
    fn servers_hold_64_and_the_instance_256_with_the_configured_bindings() {
        let grant = Grant::new("a", Some(64)).unwrap();
        let mut r = Registry::default();
        assert!(r.subscribe(&grant, wanted(0), 63, 63, 0).is_ok());
        assert_eq!(
            r.subscribe(&grant, wanted(1), 63, 63, 0),
            Err(Refused::ServerFull)
        );
        let mut elsewhere = wanted(2);
        elsewhere.server = "t".into();
        assert!(r.subscribe(&grant, elsewhere.clone(), 0, 254, 0).is_ok());
        elsewhere.event = "e3".into();
        assert_eq!(
            r.subscribe(&grant, elsewhere, 0, 254, 0),
            Err(Refused::InstanceFull)
        );
        assert_eq!(
            r.subscribe(&grant, wanted(0), 0, 0, 0),
            Err(Refused::Exists)
        );
    }

    #[test]
    fn limits_lowered_since_end_the_excess() {
        let grant = Grant::new("a", Some(64)).unwrap();
        let mut r = Registry::default();
        for n in 0..5 {
            r.subscribe(&grant, wanted(n), 0, 0, 0).unwrap();
        }
        let mut elsewhere = wanted(9);
        elsewhere.server = "t".into();
        r.subscribe(&grant, elsewhere, 0, 0, 0).unwrap();
        // Nothing changed: nothing ends.
        assert!(r.end_excess(|_| 64, |_| 0, 0).is_empty());
        // 62 bindings configured on "s": 2 of its 5 stay.
        let ended = r.end_excess(|_| 64, |s| if s == "s" { 62 } else { 0 }, 62);
        assert_eq!(ended.len(), 3);
        assert!(ended.iter().all(|s| s.server == "s"));
        // The grant allows 2 now: 1 of the 3 left ends.
        assert_eq!(r.end_excess(|_| 2, |_| 0, 0).len(), 1);
        // 255 configured in all: 1 of the 2 left stays.
        assert_eq!(r.end_excess(|_| 64, |_| 0, 255).len(), 1);
        assert_eq!(r.all().count(), 1);
    }

    #[test]
    fn only_the_owner_ends_it_and_the_index_round_trips() {
        let grant = Grant::new("a", None).unwrap();
        let mut r = Registry::default();
        let made = r.subscribe(&grant, wanted(0), 0, 0, 0).unwrap();
        assert_eq!(r.get(&made.id), Some(&made));
        let index = r.index();
        assert_eq!(Registry::from_index(&index).as_ref(), Some(&r));
        assert_eq!(Registry::from_index("not json"), None);
        assert_eq!(r.unsubscribe("b", &made.id), Err(Refused::NotFound));
        assert_eq!(r.unsubscribe("a", &made.id).map(|s| s.id), Ok(made.id));
        assert_eq!(r.all().count(), 0);
        assert_eq!(r.next_expiry(), None);
    }

    #[test]
    fn the_audit_stream_is_not_a_subscription_s_and_records_say_what_happened() {
        let grant = Grant::new("a", None).unwrap();
        let mut r = Registry::default();
        let mut w = wanted(0);
        w.into = AUDIT_STREAM.into();
        assert_eq!(
            r.subscribe(&grant, w, 0, 0, 0),
            Err(Refused::ReservedStream)
        );
        let mut w = wanted(1);
        w.delivery = vec![DeliveryMode::Webhook, DeliveryMode::Poll];
        let made = r.subscribe(&grant, w, 0, 0, 5).unwrap();
        assert_eq!(made.modes(), [DeliveryMode::Webhook, DeliveryMode::Poll]);
        let record: Value = serde_json::from_slice(&made.audit("subscribed", "tool", 7)).unwrap();
        assert_eq!(record["action"], "subscribed");
        assert_eq!(record["reason"], "tool");
        assert_eq!(record["at_ms"], 7);
        assert_eq!(record["subscription"]["id"], made.id.as_str());
        assert_eq!(r.end_where(|s| s.owner == "b"), vec![]);
        assert_eq!(r.end_where(|s| s.owner == "a"), vec![made]);
    }
}
