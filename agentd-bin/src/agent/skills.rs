//! Skills: the prompts of the `[skills] sources` servers, and per unit of work the set of
//! them loaded into its context.
//!
//! A source's prompts are listed (`prompts/list`, every page) each time it is connected:
//! dialed, dialed again, or listed again at a reload; they are its skills from then on
//! (`skills.discovered`, with their count and names; a server that declares no prompts has
//! none). A listing that fails keeps the skills listed before (`skills.discover.fail`). A
//! source that cannot be dialed is logged (`skills.source.unavailable`, once until it is
//! connected), and so is one a reload adds while it is down.
//!
//! A skill is named `<server>/<prompt>` (`agentd_tools::skills`), so that two sources'
//! prompts of the same name are two skills. `skills.load` gets the prompt with its
//! arguments (`prompts/get`) and adds its messages, each as text (a text block as it is,
//! another kind of block as its JSON), to the caller's set; the sets are kept in memory, and
//! a restart empties them.
//!
//! What a turn uses: [`Skills::messages`], the messages of the skills its unit has loaded.
//! The supervisor tells it what happened ([`Skills::listed`], [`Skills::unreachable`],
//! [`Skills::reload`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use agentd_tools::Error;
use agentd_tools::skills::{Argument, Loaded, LoadedSet, Role, Said, Skill};
use mcp_wire::{ContentBlock, Prompt, PromptMessage};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::model::Message;
use super::servers::Servers;
use crate::telemetry::catalogue::{own, skills as logs};

/// The skills: what the turns and the tools read, and where the supervisor tells what
/// happened. Cloned freely; its task ends at shutdown.
#[derive(Debug, Clone)]
pub(crate) struct Skills {
    shared: Arc<Shared>,
    notes: mpsc::UnboundedSender<Note>,
}

#[derive(Debug)]
struct Shared {
    instance: String,
    servers: Arc<dyn Servers>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// `skills.sources`, in order.
    sources: Vec<String>,
    /// Each source's skills, as last listed.
    catalogue: BTreeMap<String, Vec<Skill>>,
    /// The servers whose dial failed since they were last connected.
    down: BTreeSet<String>,
    /// Each unit's loaded set.
    loaded: BTreeMap<String, LoadedSet>,
}

/// What the skills' task is told.
#[derive(Debug)]
enum Note {
    Listed(String),
    Unreachable(String),
    Reload(Vec<String>),
}

impl Skills {
    /// The skills of `sources` on `servers`, their task one of `tasks` until `shutdown`;
    /// logged as `instance`'s.
    pub(crate) fn start(
        instance: &str,
        sources: &[String],
        servers: Arc<dyn Servers>,
        tasks: &TaskTracker,
        shutdown: CancellationToken,
    ) -> Self {
        let state = State {
            sources: sources.to_vec(),
            ..State::default()
        };
        let shared = Arc::new(Shared {
            instance: instance.to_owned(),
            servers,
            state: Mutex::new(state),
        });
        let (notes, noted) = mpsc::unbounded_channel();
        tasks.spawn(run(shared.clone(), noted, shutdown));
        Self { shared, notes }
    }

    /// The messages of the skills `unit` has loaded, in the order they were loaded, as the
    /// model is shown them: after the system prompt, before the conversation.
    pub(crate) fn messages(&self, unit: &str) -> Vec<Message> {
        let state = self.shared.lock();
        let Some(set) = state.loaded.get(unit) else {
            return Vec::new();
        };
        let said = set.skills().iter().flat_map(|s| &s.messages);
        said.map(|m| match m.role {
            Role::Assistant => Message::Assistant {
                text: Some(m.text.clone()),
                calls: Vec::new(),
            },
            _ => Message::User {
                text: m.text.clone(),
            },
        })
        .collect()
    }

    /// `server` was connected (dialed, dialed again, or listed again at a reload).
    pub(crate) fn listed(&self, server: &str) {
        let _ = self.notes.send(Note::Listed(server.to_owned()));
    }

    /// `server` could not be dialed.
    pub(crate) fn unreachable(&self, server: &str) {
        let _ = self.notes.send(Note::Unreachable(server.to_owned()));
    }

    /// The configuration was reloaded: `sources` are the `skills.sources` in force now.
    pub(crate) fn reload(&self, sources: &[String]) {
        let _ = self.notes.send(Note::Reload(sources.to_vec()));
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic under the lock leaves maps that are still whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The skills' task: each note taken in turn (a source listed while another waits).
async fn run(
    shared: Arc<Shared>,
    mut notes: mpsc::UnboundedReceiver<Note>,
    stop: CancellationToken,
) {
    loop {
        let note = tokio::select! {
            () = stop.cancelled() => return,
            note = notes.recv() => note,
        };
        let Some(note) = note else { return };
        let instance = &shared.instance;
        match note {
            Note::Listed(server) => {
                let source = {
                    let mut state = shared.lock();
                    state.down.remove(&server);
                    state.sources.contains(&server)
                };
                if source {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = discover(&shared, &server) => {}
                    }
                }
            }
            Note::Unreachable(server) => {
                let mut state = shared.lock();
                let source = state.sources.contains(&server);
                if state.down.insert(server.clone()) && source {
                    logs::source_unavailable(instance, &server);
                }
                state.catalogue.remove(&server);
            }
            Note::Reload(sources) => {
                let mut state = shared.lock();
                let added: Vec<String> = sources
                    .iter()
                    .filter(|s| !state.sources.contains(s))
                    .cloned()
                    .collect();
                state.catalogue.retain(|server, _| sources.contains(server));
                state.sources = sources;
                // The others are listed again, or report their dial, after the reload.
                for server in added.iter().filter(|s| state.down.contains(*s)) {
                    logs::source_unavailable(instance, server);
                }
            }
        }
    }
}

/// Lists the prompts of source `server`, now connected: its skills from now on.
async fn discover(shared: &Shared, server: &str) {
    let instance = &shared.instance;
    let Ok(connection) = shared.servers.connection(server) else {
        return;
    };
    let prompts = match connection.capabilities().prompts() {
        true => match connection.list_prompts().await {
            Ok(prompts) => prompts,
            Err(e) => return own::skills_discover_fail(instance, server, &e.to_string()),
        },
        false => Vec::new(),
    };
    let skills: Vec<Skill> = prompts.iter().map(|p| skill(server, p)).collect();
    let names: Vec<String> = skills.iter().map(|s| s.name.clone()).collect();
    let mut state = shared.lock();
    // A source the configuration dropped meanwhile is not kept.
    if state.sources.iter().any(|s| s == server) {
        state.catalogue.insert(server.to_owned(), skills);
        logs::discovered(instance, server, &names);
    }
}

/// Prompt `prompt` of `server` as a skill.
fn skill(server: &str, prompt: &Prompt) -> Skill {
    let arguments = prompt.arguments.iter().flatten().map(|a| {
        let required = a.required.unwrap_or(false);
        Argument::new(&a.name, a.description.as_deref(), required)
    });
    let description = prompt.description.as_deref();
    Skill::new(server, &prompt.name, description, arguments.collect())
}

/// A prompt's message as a loaded skill holds it: its text, or the JSON of a block of
/// another kind.
fn said(message: &PromptMessage) -> Said {
    let role = match message.role {
        mcp_wire::Role::Assistant => Role::Assistant,
        _ => Role::User,
    };
    let text = match &message.content {
        ContentBlock::Text(text) => text.text.clone(),
        other => serde_json::to_string(other).unwrap_or_default(),
    };
    Said::new(role, &text)
}

impl agentd_tools::skills::Skills for Skills {
    async fn list(&self) -> Result<Vec<Skill>, Error> {
        let state = self.shared.lock();
        let of = |source: &String| state.catalogue.get(source).into_iter().flatten();
        Ok(state.sources.iter().flat_map(of).cloned().collect())
    }

    async fn loaded(&self, unit: &str) -> Result<Vec<String>, Error> {
        let state = self.shared.lock();
        Ok(state
            .loaded
            .get(unit)
            .map(LoadedSet::names)
            .unwrap_or_default())
    }

    async fn load(
        &self,
        unit: &str,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> Result<Loaded, Error> {
        let skill = {
            let state = self.shared.lock();
            let mut all = state.sources.iter().flat_map(|s| state.catalogue.get(s));
            all.find_map(|skills| skills.iter().find(|s| s.name == name).cloned())
        };
        let skill = skill.ok_or_else(|| Error::NotFound {
            what: format!("skill {name:?}"),
        })?;
        skill.check(&arguments)?;
        let server = &skill.server;
        let connection = self
            .shared
            .servers
            .connection(server)
            .map_err(|a| a.into_tool(server))?;
        let arguments = (!arguments.is_empty()).then_some(arguments);
        let got = connection
            .get_prompt(&skill.prompt, arguments)
            .await
            .map_err(|e| Error::Server {
                server: server.clone(),
                detail: e.to_string(),
            })?;
        let loaded = Loaded::new(&skill, got.messages.iter().map(said).collect());
        let mut state = self.shared.lock();
        let set = state.loaded.entry(unit.to_owned()).or_default();
        set.load(loaded.clone())?;
        Ok(loaded)
    }

    async fn unload(&self, unit: &str, name: &str) -> Result<bool, Error> {
        let mut state = self.shared.lock();
        let Some(set) = state.loaded.get_mut(unit) else {
            return Ok(false);
        };
        let unloaded = set.unload(name);
        if set.is_empty() {
            state.loaded.remove(unit);
        }
        Ok(unloaded)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use agentd_tools::skills::Skills as _;
    use mcp_negotiate::Client;
    use mcp_reference_server::{Options, ReferenceServer};
    use serde_json::Value;

    use super::*;
    use crate::agent::servers::{Absent, Answer, Refused};
    use crate::telemetry::log::tests::capture;

    /// Servers `docs` and `kit`, on connections to reference servers; `down`, configured and
    /// not connected.
    #[derive(Debug)]
    struct Fake {
        docs: Arc<Client>,
        kit: Arc<Client>,
    }

    impl Servers for Fake {
        fn connection(&self, server: &str) -> Result<Arc<Client>, Absent> {
            match server {
                "docs" => Ok(self.docs.clone()),
                "kit" => Ok(self.kit.clone()),
                "down" => Err(Absent::NotConnected),
                _ => Err(Absent::Unknown),
            }
        }

        fn subscribe(&self, _: &str, _: &str, _: &str) -> Answer {
            Box::pin(async { Err(Refused::Gone) })
        }

        fn release(&self, _: &str, _: &str, _: &str) -> Answer {
            Box::pin(async { Err(Refused::Gone) })
        }
    }

    async fn connect(server: &ReferenceServer) -> Arc<Client> {
        let client = Client::builder("agentd", "0").connect(&server.url()).await;
        Arc::new(client.expect("connected"))
    }

    fn lines(written: &Mutex<Vec<String>>, event: &str) -> Vec<Value> {
        let written = written.lock().unwrap();
        let lines = written
            .iter()
            .map(|l| serde_json::from_str::<Value>(l).unwrap());
        lines.filter(|l| l["event"] == event).collect()
    }

    /// Waits, at most 10 s, until the catalogue holds `n` skills.
    async fn listing(skills: &Skills, n: usize) -> Vec<Skill> {
        let listed = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let listed = skills.list().await.unwrap();
                if listed.len() == n {
                    return listed;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        listed.await.expect("listed")
    }

    #[tokio::test]
    async fn sources_are_discovered_loaded_and_told_apart() {
        let (a, b) = (
            ReferenceServer::start(Options::default()).await,
            ReferenceServer::start(Options::default()).await,
        );
        let fake = Fake {
            docs: connect(&a).await,
            kit: connect(&b).await,
        };
        let (_guard, written) = capture();
        let sources = ["kit".to_owned(), "down".to_owned(), "docs".to_owned()];
        let skills = Skills::start(
            "t",
            &sources,
            Arc::new(fake),
            &TaskTracker::new(),
            CancellationToken::new(),
        );
        skills.unreachable("down");
        skills.unreachable("down");
        skills.unreachable("other");
        skills.listed("other");
        skills.listed("docs");
        skills.listed("kit");
        let listed = listing(&skills, 2).await;
        // In the order of the sources: kit's, then docs'.
        let names: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["kit/greet", "docs/greet"]);
        let greet = &listed[1];
        assert_eq!(
            (greet.server.as_str(), greet.prompt.as_str()),
            ("docs", "greet")
        );
        assert_eq!(greet.arguments, [Argument::new("name", None, true)]);
        let discovered = lines(&written, "skills.discovered");
        assert_eq!(discovered.len(), 2, "{discovered:?}");
        assert_eq!(discovered[0]["server"], "docs");
        assert_eq!(discovered[0]["count"], 1);
        assert_eq!(discovered[0]["skills"], serde_json::json!(["docs/greet"]));
        let unavailable = lines(&written, "skills.source.unavailable");
        assert_eq!(
            unavailable.len(),
            1,
            "once, and for a source only: {unavailable:?}"
        );
        assert_eq!(
            (&unavailable[0]["level"], &unavailable[0]["server"]),
            (&Value::from("warn"), &Value::from("down"))
        );

        let who = BTreeMap::from([("name".to_owned(), "Ada".to_owned())]);
        agentd_tools::testing::check_skills(&skills, "docs/greet", who.clone()).await;
        let unit = "conversation:c1";
        let loaded = skills.load(unit, "kit/greet", who).await.unwrap();
        assert_eq!(loaded.bytes(), "Say hello to Ada.".len());
        assert_eq!(
            skills.messages(unit),
            [Message::User {
                text: "Say hello to Ada.".into()
            }]
        );
        assert!(skills.messages("conversation:c2").is_empty());

        // A reload dropping kit: its skills are gone, the loaded one stays loaded; one
        // adding a source that is down says so.
        skills.reload(&["docs".to_owned(), "down".to_owned()]);
        let listed = listing(&skills, 1).await;
        assert_eq!(listed[0].name, "docs/greet");
        assert_eq!(skills.loaded(unit).await.unwrap(), ["kit/greet"]);
        skills.reload(&["docs".to_owned()]);
        skills.reload(&["docs".to_owned(), "down".to_owned()]);
        skills.listed("docs");
        tokio::time::timeout(Duration::from_secs(10), async {
            while lines(&written, "skills.discovered").len() < 3 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("listed again");
        assert_eq!(lines(&written, "skills.source.unavailable").len(), 2);
        let down = skills.load(unit, "down/greet", BTreeMap::new()).await;
        assert_eq!(down.unwrap_err().code(), "not_found");
    }

    #[test]
    fn a_block_that_is_not_text_is_held_as_its_json() {
        let message: PromptMessage = serde_json::from_value(serde_json::json!({
            "role": "assistant",
            "content": {"type": "resource_link", "uri": "a://b", "name": "b"},
        }))
        .unwrap();
        let said = said(&message);
        assert_eq!(said.role, Role::Assistant);
        let block: Value = serde_json::from_str(&said.text).unwrap();
        assert_eq!(block["uri"], "a://b");
    }
}
