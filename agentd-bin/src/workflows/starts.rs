//! The starts in force: what the workflows of the configuration and the store's (the
//! configuration's shadowing the store's of the same name) say starts their runs besides
//! `workflow.run`.
//!
//! A `subscribe` start is a resource subscription held as owner `start:<workflow>/<node>`;
//! an `event` start takes the occurrences of its stream from where it stands (its position
//! kept in the store with each run it starts).

use std::collections::BTreeMap;

use agentd_tools::workflow::{Definition, StartOn};
use serde_json::{Value, json};

use crate::store::starts::Start;

/// A start: its workflow and its node.
pub(super) type Key = (String, String);

/// A subscribe start's resource: its server and URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Resource {
    pub(super) server: String,
    pub(super) uri: String,
}

/// The owner of a subscribe start's subscription.
pub(super) fn owner((workflow, node): &Key) -> String {
    format!("start:{workflow}/{node}")
}

/// The unit a start's run is started by (its `by`).
pub(super) fn by(node: &str) -> String {
    format!("start:{node}")
}

/// The input of a run a resource change starts.
pub(super) fn updated_input(server: &str, uri: &str) -> Value {
    json!({"server": server, "uri": uri})
}

/// The workflows in force: the configuration's, then the store's it does not shadow.
pub(super) fn in_force<'a>(
    configured: &'a BTreeMap<String, Definition>,
    defined: &'a BTreeMap<String, Definition>,
) -> impl Iterator<Item = &'a Definition> {
    let shadowed = |d: &&Definition| !configured.contains_key(&d.name);
    configured.values().chain(defined.values().filter(shadowed))
}

/// The subscribe starts of `definitions`.
pub(super) fn subscribes<'a>(
    definitions: impl Iterator<Item = &'a Definition>,
) -> BTreeMap<Key, Resource> {
    definitions
        .flat_map(|d| d.starts.iter().map(move |s| (&d.name, s)))
        .filter_map(|(workflow, start)| match &start.on {
            StartOn::Subscribe { server, uri } => Some((
                (workflow.clone(), start.node.clone()),
                Resource {
                    server: server.clone(),
                    uri: uri.clone(),
                },
            )),
            _ => None,
        })
        .collect()
}

/// The event starts of `definitions`.
pub(super) fn events<'a>(definitions: impl Iterator<Item = &'a Definition>) -> Vec<Start> {
    definitions
        .flat_map(|d| d.starts.iter().map(move |s| (&d.name, s)))
        .filter_map(|(workflow, s)| match &s.on {
            StartOn::Event { stream } => Some(Start {
                workflow: workflow.clone(),
                node: s.node.clone(),
                stream: stream.clone(),
            }),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn definition(name: &str, starts: Value) -> Definition {
        let steps = json!([{"id": "a", "type": "wait", "on": {"duration": 1}}]);
        Definition::parse(name, &json!({"starts": starts, "steps": steps})).unwrap()
    }

    #[test]
    fn the_configuration_shadows_the_store_and_starts_are_found_by_kind() {
        let on = |server: &str| json!([{"subscribe": {"server": server, "uri": "demo://x"}}]);
        let configured = BTreeMap::from([("w".to_owned(), definition("w", on("a")))]);
        let defined = BTreeMap::from([
            ("w".to_owned(), definition("w", on("shadowed"))),
            (
                "v".to_owned(),
                definition("v", json!([{"id": "e", "event": {"stream": "alerts"}}])),
            ),
        ]);
        let found = subscribes(in_force(&configured, &defined));
        let key = ("w".to_owned(), "#0".to_owned());
        assert_eq!(found.keys().collect::<Vec<_>>(), [&key]);
        assert_eq!(found[&key].server, "a");
        assert_eq!(owner(&key), "start:w/#0");
        let alerts = events(in_force(&configured, &defined));
        let start = Start {
            workflow: "v".to_owned(),
            node: "e".to_owned(),
            stream: "alerts".to_owned(),
        };
        assert_eq!(alerts, [start]);
    }
}
