//! The runs under way by what they wait for: by the instant their timer is due (an attempt's
//! bound, a retry's delay, a wait's duration), and by the resource their parked wait
//! watches. The engine looks up the runs a timer or a change concerns, not every run.

use std::collections::{BTreeMap, BTreeSet};

use agentd_tools::workflow::run::{Run, StepStatus};

/// A resource: its server and URI.
type Resource = (String, String);

/// The runs under way, indexed by their timer and by the resource they watch.
#[derive(Debug, Default)]
pub(super) struct Due {
    /// (due, run), soonest first.
    timers: BTreeSet<(i64, String)>,
    /// Each run's timer.
    timer: BTreeMap<String, i64>,
    /// (server, uri, run): the parked waits by resource.
    watching: BTreeSet<(String, String, String)>,
    /// Each run's watched resource.
    watched: BTreeMap<String, Resource>,
}

impl Due {
    /// Run `id` stands as `run` does now: its timer and its watched resource, if any.
    pub(super) fn set(&mut self, id: &str, run: &Run) {
        self.forget(id);
        if let Some(at) = run.poll_timeout() {
            self.timers.insert((at, id.to_owned()));
            self.timer.insert(id.to_owned(), at);
        }
        let record = run.record();
        let parked = record.steps.get(record.step).and_then(|step| {
            let waiting = step.status == StepStatus::Waiting && !run.is_settled();
            step.watched.as_ref().filter(|_| waiting)
        });
        if let Some(watched) = parked {
            let (server, uri) = (watched.server.clone(), watched.uri.clone());
            self.watching
                .insert((server.clone(), uri.clone(), id.to_owned()));
            self.watched.insert(id.to_owned(), (server, uri));
        }
    }

    /// Run `id` is no longer under way.
    pub(super) fn forget(&mut self, id: &str) {
        if let Some(at) = self.timer.remove(id) {
            self.timers.remove(&(at, id.to_owned()));
        }
        if let Some((server, uri)) = self.watched.remove(id) {
            self.watching.remove(&(server, uri, id.to_owned()));
        }
    }

    /// When the soonest timer is due.
    pub(super) fn next(&self) -> Option<i64> {
        self.timers.first().map(|(at, _)| *at)
    }

    /// The runs whose timer is due at `now_ms`, soonest first.
    pub(super) fn due(&self, now_ms: i64) -> Vec<String> {
        let due = self.timers.iter().take_while(|(at, _)| *at <= now_ms);
        due.map(|(_, id)| id.clone()).collect()
    }

    /// The runs whose parked wait watches `uri` of `server`.
    pub(super) fn watching(&self, server: &str, uri: &str) -> Vec<String> {
        let from = (server.to_owned(), uri.to_owned(), String::new());
        let on = self.watching.range(from..);
        let on = on.take_while(|(s, u, _)| s == server && u == uri);
        on.map(|(_, _, id)| id.clone()).collect()
    }

    /// The runs whose parked wait watches a resource of `server`.
    pub(super) fn on_server(&self, server: &str) -> Vec<String> {
        let from = (server.to_owned(), String::new(), String::new());
        let on = self
            .watching
            .range(from..)
            .take_while(|(s, _, _)| s == server);
        on.map(|(_, _, id)| id.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use agentd_tools::workflow::Definition;
    use agentd_tools::workflow::run::{Action, Limits};
    use serde_json::json;

    use super::*;

    fn run(id: &str, on: serde_json::Value) -> Run {
        let body = json!({"steps": [{"id": "w", "type": "wait", "on": on}]});
        let definition = Definition::parse("w", &body).unwrap();
        let mut run = Run::start(id, definition, json!({}), "u", Limits::default(), 0).unwrap();
        while let Some(action) = run.poll_action(0) {
            if matches!(action, Action::Subscribe { .. }) {
                break;
            }
        }
        run
    }

    #[test]
    fn runs_are_found_by_their_timer_and_by_what_they_watch() {
        let mut due = Due::default();
        let watch = |uri: &str| json!({"resource": {"server": "s", "uri": uri}});
        due.set("late", &run("late", json!({"duration": 50})));
        due.set("soon", &run("soon", json!({"duration": 10})));
        due.set("x", &run("x", watch("u://x")));
        due.set("y", &run("y", watch("u://y")));
        assert_eq!(due.next(), Some(10));
        assert!(due.due(9).is_empty());
        assert_eq!(due.due(10), ["soon"]);
        assert_eq!(due.due(50), ["soon", "late"]);
        assert_eq!(due.watching("s", "u://x"), ["x"]);
        assert!(due.watching("s", "u://").is_empty());
        assert!(due.watching("t", "u://x").is_empty());
        assert_eq!(due.on_server("s"), ["x", "y"]);
        due.forget("soon");
        due.forget("x");
        assert_eq!(due.due(50), ["late"]);
        assert_eq!(due.on_server("s"), ["y"]);
        // Set again: its old entries go.
        due.set("late", &run("late", json!({"duration": 70})));
        assert_eq!(due.due(60), Vec::<String>::new());
        assert_eq!(due.next(), Some(70));
    }
}
