//! The tools a turn offers its model, under names models accept (`^[a-zA-Z0-9_-]{1,64}$`),
//! and the way back from a name to the tool.
//!
//! - One of agentd's own tools is offered as its name with `.` as `_`: `memory.get` is
//!   `memory_get`.
//! - A server's tool is offered as `<server>__<tool>`: `weather__get_forecast`.
//! - Every character outside the set becomes `_`; a name past 64 characters keeps its first
//!   55 and ends in `_` and 8 hex digits of the SHA-256 of the tool's own name (its server's,
//!   a NUL, its own), so that it is the same at every offer.
//! - Two tools that come to one name: the first offered keeps it, the next is offered as the
//!   name ending in `_2` (`_3`, … the first free one; cut to fit). Own tools are offered
//!   first, in the catalogue's order, then each server's, servers by name, tools in the
//!   server's order: the same tools always get the same names. Each collision is told
//!   ([`Collision`]), for the log.

use std::collections::{BTreeMap, BTreeSet};

use mcp_wire::Tool;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::meta::hex;
use super::model::Function;

/// The longest name models accept.
pub(crate) const NAME_MAX: usize = 64;

/// How many hex digits of the hash end a name that was cut.
const HASH_DIGITS: usize = 8;

/// Between a server's name and its tool's.
const SEPARATOR: &str = "__";

/// The tool an offered name stands for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Origin {
    /// One of agentd's own tools, by its name (`memory.get`).
    Own(String),
    /// A tool of a connected server.
    Server {
        /// The server, by its configured name.
        server: String,
        /// The tool, by the server's name for it.
        tool: String,
    },
}

impl Origin {
    /// The server, for a server's tool.
    pub(crate) fn server(&self) -> Option<&str> {
        match self {
            Self::Own(_) => None,
            Self::Server { server, .. } => Some(server),
        }
    }

    /// The tool's own name.
    pub(crate) fn tool(&self) -> &str {
        match self {
            Self::Own(tool) | Self::Server { tool, .. } => tool,
        }
    }
}

/// A tool offered under another name than it wanted: another tool offered before it has
/// that one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Collision {
    /// The tool.
    pub(crate) origin: Origin,
    /// The name it came to.
    pub(crate) wanted: String,
    /// The name it is offered as.
    pub(crate) name: String,
}

/// What a turn offers its model: the functions, and the tool behind each name.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Offer {
    functions: Vec<Function>,
    origins: BTreeMap<String, Origin>,
}

/// A tool to offer: where it goes, what it does, its arguments' JSON Schema.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Offered {
    /// The tool.
    pub(crate) origin: Origin,
    /// What it does.
    pub(crate) description: String,
    /// The JSON Schema of its arguments.
    pub(crate) parameters: Value,
}

impl Offer {
    /// The offer of agentd's own tools `own` (in the catalogue's order) and the servers'
    /// tools `served`, each with its server (servers by name, each's tools as listed), and
    /// the collisions of their names.
    pub(crate) fn new<'t, 's>(
        own: impl IntoIterator<Item = &'t agentd_tools::Tool>,
        served: impl IntoIterator<Item = (&'s str, &'s Tool)>,
    ) -> (Self, Vec<Collision>) {
        let own = own.into_iter().map(|t| Offered {
            origin: Origin::Own(t.name.to_owned()),
            description: t.does.to_owned(),
            parameters: t.input_schema.clone(),
        });
        let served = served.into_iter().map(|(server, t)| Offered {
            origin: Origin::Server {
                server: server.to_owned(),
                tool: t.name.clone(),
            },
            description: t.description.clone().unwrap_or_default(),
            // A schema that is no JSON object takes anything.
            parameters: serde_json::from_str(t.input_schema.get())
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({"type": "object"})),
        });
        Self::of(own.chain(served))
    }

    /// The offer of `tools`, named in their order, and the collisions of their names.
    pub(crate) fn of(tools: impl IntoIterator<Item = Offered>) -> (Self, Vec<Collision>) {
        let mut offer = Self::default();
        let mut taken = BTreeSet::new();
        let mut collisions = Vec::new();
        for tool in tools {
            let wanted = wanted(&tool.origin);
            let name = free(&wanted, &taken);
            taken.insert(name.clone());
            if name != wanted {
                collisions.push(Collision {
                    origin: tool.origin.clone(),
                    wanted,
                    name: name.clone(),
                });
            }
            offer.functions.push(Function {
                name: name.clone(),
                description: tool.description,
                parameters: tool.parameters,
            });
            offer.origins.insert(name, tool.origin);
        }
        (offer, collisions)
    }

    /// The functions, in the order offered.
    pub(crate) fn functions(&self) -> &[Function] {
        &self.functions
    }

    /// The tool offered as `name`, if one is.
    pub(crate) fn origin(&self, name: &str) -> Option<&Origin> {
        self.origins.get(name)
    }
}

/// The name `origin` comes to before collisions.
pub(crate) fn wanted(origin: &Origin) -> String {
    let (full, identity) = match origin {
        Origin::Own(tool) => (tool.clone(), tool.clone()),
        Origin::Server { server, tool } => (
            format!("{server}{SEPARATOR}{tool}"),
            format!("{server}\0{tool}"),
        ),
    };
    let name: String = full
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => c,
            _ => '_',
        })
        .collect();
    if name.len() <= NAME_MAX {
        return name;
    }
    let hash = Sha256::digest(identity.as_bytes());
    let keep = NAME_MAX - 1 - HASH_DIGITS;
    format!("{}_{}", &name[..keep], &hex(&hash)[..HASH_DIGITS])
}

/// `wanted` when it is free, else the first free `<wanted>_<n>` from 2 (`wanted` cut to
/// fit).
fn free(wanted: &str, taken: &BTreeSet<String>) -> String {
    if !taken.contains(wanted) {
        return wanted.to_owned();
    }
    (2u64..)
        .map(|n| {
            let suffix = format!("_{n}");
            // Every character is ASCII by now.
            let keep = wanted.len().min(NAME_MAX - suffix.len());
            format!("{}{suffix}", &wanted[..keep])
        })
        .find(|name| !taken.contains(name))
        .unwrap_or_else(|| wanted.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own(name: &str) -> Origin {
        Origin::Own(name.into())
    }

    fn served(server: &str, tool: &str) -> Origin {
        Origin::Server {
            server: server.into(),
            tool: tool.into(),
        }
    }

    fn offered(origin: Origin) -> Offered {
        Offered {
            origin,
            description: String::new(),
            parameters: json!({"type": "object"}),
        }
    }

    fn names(offer: &Offer) -> Vec<&str> {
        offer.functions().iter().map(|f| f.name.as_str()).collect()
    }

    /// Whether `name` is one models accept.
    fn accepted(name: &str) -> bool {
        (1..=NAME_MAX).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn names_are_what_models_accept() {
        assert_eq!(wanted(&own("memory.get")), "memory_get");
        assert_eq!(wanted(&own("ask_human")), "ask_human");
        assert_eq!(
            wanted(&served("weather", "get_forecast")),
            "weather__get_forecast"
        );
        assert_eq!(
            wanted(&served("my.srv", "tools/list é")),
            "my_srv__tools_list__"
        );
        assert_eq!(wanted(&served("a-b", "C-9")), "a-b__C-9");
        for origin in [
            own("x"),
            served("s", "t"),
            served("s", "é".repeat(80).as_str()),
        ] {
            assert!(accepted(&wanted(&origin)), "{origin:?}");
        }
    }

    #[test]
    fn a_long_name_is_cut_with_a_stable_hash() {
        let long = "t".repeat(100);
        let name = wanted(&served("s", &long));
        assert_eq!(name.len(), NAME_MAX);
        assert!(accepted(&name));
        assert!(
            name.starts_with(&format!("s__{}", "t".repeat(52))),
            "{name}"
        );
        assert_eq!(&name[55..56], "_");
        // The same tool, the same name; another tool of the same start, another name.
        assert_eq!(name, wanted(&served("s", &long)));
        let other = wanted(&served("s", &format!("{long}x")));
        assert_eq!(other[..55], name[..55]);
        assert_ne!(other, name);
        // The hash is of the tool's own names: `a.b` and `a_b` cut alike differ.
        let dotted = wanted(&served("s", &format!("a.{long}")));
        let plain = wanted(&served("s", &format!("a_{long}")));
        assert_eq!(dotted[..55], plain[..55]);
        assert_ne!(dotted, plain);
        // At 64 exactly, nothing is cut.
        let at = "t".repeat(NAME_MAX - 3);
        assert_eq!(wanted(&served("s", &at)), format!("s__{at}"));
    }

    #[test]
    fn collisions_take_the_first_free_suffix_in_order() {
        let tools = [
            own("memory.get"),
            served("memory", "get"),
            served("a", "x.y"),
            served("a", "x_y"),
            served("a", "x/y"),
            served("b", "memory_get"),
            own("memory_get"),
        ];
        let (offer, collisions) = Offer::of(tools.iter().cloned().map(offered));
        assert_eq!(
            names(&offer),
            [
                "memory_get",
                "memory__get",
                "a__x_y",
                "a__x_y_2",
                "a__x_y_3",
                "b__memory_get",
                "memory_get_2",
            ]
        );
        let told: Vec<(&str, &str, &str)> = collisions
            .iter()
            .map(|c| (c.origin.tool(), c.wanted.as_str(), c.name.as_str()))
            .collect();
        assert_eq!(
            told,
            [
                ("x_y", "a__x_y", "a__x_y_2"),
                ("x/y", "a__x_y", "a__x_y_3"),
                ("memory_get", "memory_get", "memory_get_2"),
            ]
        );
        assert_eq!(collisions[0].origin.server(), Some("a"));
        assert_eq!(collisions[2].origin.server(), None);
        // And back.
        for (tool, name) in tools.iter().zip(names(&offer)) {
            assert_eq!(offer.origin(name), Some(tool));
        }
        assert_eq!(offer.origin("nothing"), None);
        // The same tools, the same names.
        let (again, _) = Offer::of(tools.iter().cloned().map(offered));
        assert_eq!(again, offer);
    }

    #[test]
    fn a_suffix_is_fitted_into_64() {
        let long = "t".repeat(NAME_MAX - 4);
        let tools = [
            served("s", &format!("{long}_")),
            served("s", &format!("{long}.")),
        ];
        let (offer, collisions) = Offer::of(tools.into_iter().map(offered));
        let names = names(&offer);
        assert_eq!(names[1], format!("{}_2", &names[0][..NAME_MAX - 2]));
        assert!(names.iter().all(|n| accepted(n)), "{names:?}");
        assert_eq!(collisions.len(), 1);
        // A name taken by a suffix is suffixed in turn.
        let tools = [own("a"), own("a.2"), own("a_2"), own("a")];
        let (offer, _) = Offer::of(tools.into_iter().map(offered));
        assert_eq!(self::names(&offer), ["a", "a_2", "a_2_2", "a_3"]);
    }

    #[test]
    fn own_tools_come_first_then_servers_by_name() {
        let set = agentd_tools::tool("memory.set").unwrap();
        let list = agentd_tools::tool("memory.list").unwrap();
        let tools = |tools: Value| -> Vec<Tool> { serde_json::from_value(tools).unwrap() };
        let zeta = tools(json!([{"name": "memory_set", "inputSchema": {"type": "object"}}]));
        let alpha = tools(json!([
            {"name": "add", "description": "Adds.",
             "inputSchema": {"type": "object", "required": ["a"]}},
            {"name": "odd", "inputSchema": true},
        ]));
        let alpha = alpha.iter().map(|t| ("alpha", t));
        let (offer, collisions) =
            Offer::new([set, list], alpha.chain(zeta.iter().map(|t| ("zeta", t))));
        assert_eq!(
            names(&offer),
            [
                "memory_set",
                "memory_list",
                "alpha__add",
                "alpha__odd",
                "zeta__memory_set"
            ]
        );
        assert!(collisions.is_empty());
        let add = &offer.functions()[2];
        assert_eq!(add.description, "Adds.");
        assert_eq!(add.parameters, json!({"type": "object", "required": ["a"]}));
        assert_eq!(offer.functions()[3].parameters, json!({"type": "object"}));
        assert_eq!(offer.functions()[0].parameters, set.input_schema);
        assert_eq!(offer.functions()[0].description, set.does);
    }
}
