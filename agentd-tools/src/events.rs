//! `events.list`, `events.subscribe`, `events.unsubscribe` and `events.subscriptions`:
//! runtime MCP Events subscriptions, as tools.
//!
//! The tools parse their arguments, check that the caller may use them, and call the
//! library calls of [`Subscriptions`], which the daemon implements over its held
//! connections, its store and its [`Registry`](crate::runtime::Registry). They are
//! offered to root and workflow callers whose owner's grant sets `tools: true`.
//!
//! ```
//! use agentd_tools::Grant;
//! use agentd_tools::events::{Caller, Subscriptions, call, input_schema};
//! use agentd_tools::runtime::{Refused, Subscription, Wanted};
//! use mcp_wire::events::EventType;
//! use serde_json::json;
//!
//! /// No server, no subscriptions, and tools for everyone.
//! struct Nothing;
//!
//! impl Subscriptions for Nothing {
//!     fn offers_tools(&self, _owner: &str) -> bool {
//!         true
//!     }
//!     async fn list(&self, server: &str) -> Result<Vec<EventType>, Refused> {
//!         Err(Refused::UnknownServer { server: server.to_owned() })
//!     }
//!     async fn subscribe(&self, _: &str, w: Wanted) -> Result<Subscription, Refused> {
//!         Err(Refused::UnknownServer { server: w.server })
//!     }
//!     async fn unsubscribe(&self, _: &str, _: &str) -> Result<Subscription, Refused> {
//!         Err(Refused::NotFound)
//!     }
//!     fn subscriptions(&self, _owner: &str) -> Vec<Subscription> {
//!         Vec::new()
//!     }
//! }
//!
//! # run_now(async {
//! let root = Caller::new(Grant::Root, "root");
//! let listed = call(&Nothing, root, "events.subscriptions", json!({})).await.unwrap();
//! assert_eq!(listed, json!({"subscriptions": []}));
//! assert!(call(&Nothing, root, "events.list", json!({"server": "x"})).await.is_err());
//! assert!(input_schema("events.subscribe").is_some());
//! # });
//! # fn run_now(f: impl Future<Output = ()>) {
//! #     let mut f = std::pin::pin!(f);
//! #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
//! #     assert!(f.as_mut().poll(&mut cx).is_ready());
//! # }
//! ```

use std::time::Duration;

use mcp_wire::events::{DeliveryMode, EventType};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::runtime::{Refused, Subscription, Wanted};
use crate::{Error, Grant, catalogue, tool};

/// Who calls an events tool: its kind, for the grants, and the owner of what it makes (the
/// conversation, or a workflow's name), whose events grant says whether it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller<'a> {
    /// Its kind.
    pub kind: Grant,
    /// The owner of what it makes.
    pub owner: &'a str,
}

impl<'a> Caller<'a> {
    /// A caller of `kind`, owning what it makes as `owner`.
    pub fn new(kind: Grant, owner: &'a str) -> Self {
        Self { kind, owner }
    }
}

/// The names of the events tools.
pub const TOOLS: [&str; 4] = [
    "events.list",
    "events.subscribe",
    "events.unsubscribe",
    "events.subscriptions",
];

/// The library calls the events tools make; the daemon implements them.
pub trait Subscriptions {
    /// Whether `owner`'s grant sets `tools: true`.
    fn offers_tools(&self, owner: &str) -> bool;

    /// The event types `server` offers, every page listed.
    fn list(&self, server: &str) -> impl Future<Output = Result<Vec<EventType>, Refused>> + Send;

    /// Makes a subscription for `owner`, checked against the server's listing first.
    fn subscribe(
        &self,
        owner: &str,
        wanted: Wanted,
    ) -> impl Future<Output = Result<Subscription, Refused>> + Send;

    /// Ends `owner`'s subscription `id`.
    fn unsubscribe(
        &self,
        owner: &str,
        id: &str,
    ) -> impl Future<Output = Result<Subscription, Refused>> + Send;

    /// `owner`'s live subscriptions.
    fn subscriptions(&self, owner: &str) -> Vec<Subscription>;
}

/// Whether the events tools are offered to `caller`.
pub fn offered(subscriptions: &impl Subscriptions, caller: Caller<'_>) -> bool {
    may_use(caller, TOOLS[0]) && subscriptions.offers_tools(caller.owner)
}

fn may_use(caller: Caller<'_>, tool: &str) -> bool {
    catalogue()
        .iter()
        .any(|t| t.name == tool && t.grants.contains(&caller.kind))
}

/// The JSON Schema of `tool`'s arguments, if it is an events tool.
pub fn input_schema(tool_name: &str) -> Option<Value> {
    TOOLS
        .contains(&tool_name)
        .then(|| tool(tool_name).map(|t| t.input_schema.clone()))
        .flatten()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    server: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubscribeArgs {
    server: String,
    event: String,
    into: String,
    #[serde(default)]
    arguments: Map<String, Value>,
    delivery: Option<Vec<String>>,
    lifetime_s: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnsubscribeArgs {
    subscription: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// Calls events tool `tool` for `caller` with `arguments`: its result, as JSON.
pub async fn call(
    subscriptions: &impl Subscriptions,
    caller: Caller<'_>,
    tool: &str,
    arguments: Value,
) -> Result<Value, Error> {
    if !TOOLS.contains(&tool) {
        return Err(Error::UnknownTool {
            tool: tool.to_owned(),
        });
    }
    if !offered(subscriptions, caller) {
        return Err(Error::NotGranted {
            tool: tool.to_owned(),
            scope: None,
        });
    }
    if let Some(t) = crate::tool(tool) {
        t.check(&arguments)?;
    }
    let bad = |err: serde_json::Error| Error::invalid(tool, "", "type", err.to_string());
    match tool {
        "events.list" => {
            let args: ListArgs = serde_json::from_value(arguments).map_err(bad)?;
            let types = subscriptions.list(&args.server).await?;
            Ok(json!({"server": args.server, "types": types}))
        }
        "events.subscribe" => {
            let args: SubscribeArgs = serde_json::from_value(arguments).map_err(bad)?;
            let wanted =
                wanted(args).map_err(|err| Error::invalid(tool, "/delivery", "enum", err))?;
            let made = subscriptions.subscribe(caller.owner, wanted).await?;
            Ok(json!({"subscription": made}))
        }
        "events.unsubscribe" => {
            let args: UnsubscribeArgs = serde_json::from_value(arguments).map_err(bad)?;
            let ended = subscriptions
                .unsubscribe(caller.owner, &args.subscription)
                .await?;
            Ok(json!({"subscription": ended}))
        }
        _ => {
            let NoArgs {} = serde_json::from_value(arguments).map_err(bad)?;
            Ok(json!({"subscriptions": subscriptions.subscriptions(caller.owner)}))
        }
    }
}

fn wanted(args: SubscribeArgs) -> Result<Wanted, String> {
    let mut wanted = Wanted::new(&args.server, &args.event, &args.into);
    wanted.arguments = args.arguments;
    if let Some(names) = args.delivery {
        let modes: Option<Vec<DeliveryMode>> =
            names.iter().map(|m| DeliveryMode::parse(m)).collect();
        match modes {
            Some(modes) if !modes.is_empty() => wanted.delivery = modes,
            _ => return Err("delivery is a list of \"webhook\", \"poll\" or \"push\"".to_owned()),
        }
    }
    // Out of range is the registry's refusal (`Refused::Lifetime`), in its words.
    wanted.lifetime = args.lifetime_s.map(Duration::from_secs);
    Ok(wanted)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use crate::runtime::{Grant, Registry};

    use super::*;
    use crate::Grant as Kind;

    /// The registry alone, over one server offering `ticket.created`.
    #[derive(Default)]
    struct Fake {
        registry: Mutex<Registry>,
    }

    impl Subscriptions for Fake {
        fn offers_tools(&self, owner: &str) -> bool {
            owner != "quiet"
        }
        async fn list(&self, server: &str) -> Result<Vec<EventType>, Refused> {
            match server {
                "tickets" => Ok(vec![EventType::new(
                    "ticket.created",
                    &[DeliveryMode::Poll],
                )]),
                _ => Err(Refused::UnknownServer {
                    server: server.to_owned(),
                }),
            }
        }
        async fn subscribe(&self, owner: &str, wanted: Wanted) -> Result<Subscription, Refused> {
            let grant = Grant::new(owner, Some(1))?;
            self.registry
                .lock()
                .unwrap()
                .subscribe(&grant, wanted, 0, 0, 0)
        }
        async fn unsubscribe(&self, owner: &str, id: &str) -> Result<Subscription, Refused> {
            self.registry.lock().unwrap().unsubscribe(owner, id)
        }
        fn subscriptions(&self, owner: &str) -> Vec<Subscription> {
            let registry = self.registry.lock().unwrap();
            registry.subscriptions(owner).into_iter().cloned().collect()
        }
    }

    /// Calls `tool` over the fake, which never waits; every answer must fit the tool's
    /// output schema.
    fn called(fake: &Fake, caller: Caller<'_>, tool: &str, args: Value) -> Result<Value, Error> {
        let mut f = std::pin::pin!(call(fake, caller, tool, args));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let std::task::Poll::Ready(got) = f.as_mut().poll(&mut cx) else {
            unreachable!("the fake never waits")
        };
        if let Ok(answer) = &got {
            crate::schema::assert_answer(tool, answer);
        }
        got
    }

    #[test]
    fn a_subscription_is_made_listed_and_ended_by_its_owner() {
        let fake = Fake::default();
        let root = Caller::new(Kind::Root, "root");
        let listed = called(&fake, root, "events.list", json!({"server": "tickets"})).unwrap();
        assert_eq!(listed["types"][0]["name"], "ticket.created");
        let args = json!({
            "server": "tickets",
            "event": "ticket.created",
            "into": "inbox",
            "arguments": {"project": "ops"},
            "delivery": ["webhook", "poll"],
            "lifetime_s": 60,
        });
        let made = called(&fake, root, "events.subscribe", args.clone()).unwrap();
        let made = &made["subscription"];
        assert_eq!(made["delivery"], json!(["webhook", "poll"]));
        assert_eq!(made["expires_ms"], 60_000);
        assert_eq!(made["arguments"], json!({"project": "ops"}));
        // The grant allows one.
        let mut other = args.clone();
        other["event"] = json!("ticket.closed");
        assert!(matches!(
            called(&fake, root, "events.subscribe", other),
            Err(Error::Refused(Refused::GrantSpent { live: 1 }))
        ));
        let mine = called(&fake, root, "events.subscriptions", json!({})).unwrap();
        assert_eq!(mine["subscriptions"].as_array().unwrap().len(), 1);
        // Another owner neither sees it nor ends it.
        let step = Caller::new(Kind::Workflow, "nightly");
        let theirs = called(&fake, step, "events.subscriptions", json!({})).unwrap();
        assert_eq!(theirs, json!({"subscriptions": []}));
        let id = json!({"subscription": made["id"]});
        assert!(matches!(
            called(&fake, step, "events.unsubscribe", id.clone()),
            Err(Error::Refused(Refused::NotFound))
        ));
        let ended = called(&fake, root, "events.unsubscribe", id).unwrap();
        assert_eq!(ended["subscription"]["id"], made["id"]);
        assert!(fake.subscriptions("root").is_empty());
    }

    #[test]
    fn the_tools_are_offered_to_root_and_workflows_whose_grant_says_so() {
        let fake = Fake::default();
        let list = json!({"server": "tickets"});
        assert!(offered(&fake, Caller::new(Kind::Root, "root")));
        assert!(offered(&fake, Caller::new(Kind::Workflow, "w")));
        for caller in [
            Caller::new(Kind::Subagent, "sub"),
            Caller::new(Kind::Everyone, "a2a"),
            Caller::new(Kind::Root, "quiet"),
        ] {
            assert!(!offered(&fake, caller));
            assert_eq!(
                called(&fake, caller, "events.list", list.clone()),
                Err(Error::NotGranted {
                    tool: "events.list".into(),
                    scope: None,
                })
            );
        }
        assert_eq!(
            called(&fake, Caller::new(Kind::Root, "root"), "memory.get", list),
            Err(Error::UnknownTool {
                tool: "memory.get".into()
            })
        );
    }

    #[test]
    fn arguments_are_checked_before_anything_is_called() {
        let fake = Fake::default();
        let root = Caller::new(Kind::Root, "root");
        for (tool, args) in [
            ("events.list", json!({})),
            ("events.list", json!({"server": "tickets", "extra": 1})),
            ("events.subscribe", json!({"server": "tickets"})),
            (
                "events.subscribe",
                json!({"server": "t", "event": "e", "into": "i", "delivery": ["carrier"]}),
            ),
            (
                "events.subscribe",
                json!({"server": "t", "event": "e", "into": "i", "delivery": []}),
            ),
            ("events.unsubscribe", json!({"subscription": 7})),
            ("events.subscriptions", json!({"owner": "someone"})),
        ] {
            let got = called(&fake, root, tool, args.clone());
            assert!(
                matches!(&got, Err(Error::InvalidArguments { tool: t, .. }) if t == tool),
                "{tool} {args}: {got:?}"
            );
        }
        // A lifetime past 30 days breaks the schema, at its pointer.
        let long = json!({"server": "t", "event": "e", "into": "i", "lifetime_s": 2_592_001});
        let got = called(&fake, root, "events.subscribe", long);
        assert!(
            matches!(&got, Err(Error::InvalidArguments { pointer, rule, .. })
                if pointer == "/lifetime_s" && rule == "maximum"),
            "{got:?}"
        );
        for tool in TOOLS {
            let schema = input_schema(tool).unwrap();
            assert_eq!(schema["type"], "object", "{tool}");
            assert_eq!(schema["additionalProperties"], false, "{tool}");
        }
        assert_eq!(input_schema("memory.get"), None);
    }
}
