//! A subagent's session: connections of its own to its servers (turn workers of a pool of
//! its own: `clientInfo` without a title, elicitation, the fixed 60 s timeout), the tools
//! they listed, the note of their resources, and the tools its model is offered.
//!
//! Opened at the first turn of a run that has none: each of its servers dialed (all at
//! once), its tools listed by the dial, its resources listed (`resources/list`) when it
//! declares `resources`. A server of the subagent that is not held, or that cannot be
//! reached, fails the open.
//!
//! At each turn boundary ([`Session::boundary`]) the servers whose tools changed since
//! (their `notifications/tools/list_changed`, heard by the supervisor; or dialed afresh by a
//! reload) are listed again, each over its connection: `mcp.tools_refresh_failed` (the server
//! named in `err`) keeps what it listed before; once any was listed again,
//! `mcp.tools_refreshed` says the size of the catalogue now (the tools of its servers).
//!
//! The model is offered the own tools granted to subagents (narrowed by the run's `tools`),
//! `resource.read` when one of its servers declares `resources`, and its servers' tools, in
//! the order of its servers, their names made unique as a conversation's are (a collision
//! logged once a session, `tool.name.collision`). The session is the subagent's
//! [`OwnTools`]: `resource.read` is answered here (logged and counted as agentd's own tools
//! are), every other own tool by agentd's.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use agentd_tools::resource::{self, Resources};
use agentd_tools::{Caller, Error, Grants, Scope, Tool};
use futures_util::future::join_all;
use mcp_negotiate::Catalog;
use mcp_wire::{Resource, ResourceContents};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use crate::agent::calls::{CALL_MAX, Called, OwnTools, Turn};
use crate::agent::conversations::Setup;
use crate::agent::names::{Collision, Offer};
use crate::agent::workers::{Elicitors, Followed, Workers};
use crate::telemetry::catalogue::{connections, own};

/// A subagent's servers, its connections to them and what they listed.
pub(crate) struct Session {
    instance: String,
    /// Its servers, in the order the run named them (by name when it named none).
    servers: Vec<String>,
    followed: BTreeMap<String, Followed>,
    workers: Workers,
    catalogs: BTreeMap<String, Arc<Catalog>>,
    /// Its servers that declare `resources`, in order.
    resourceful: Vec<String>,
    /// The server that listed each URI first.
    listed: BTreeMap<String, String>,
    note: Option<String>,
    narrowing: Option<Grants>,
    own: Arc<dyn OwnTools>,
    offer: Offer,
    /// The names that collided in its offer, each logged once.
    collisions: Vec<Collision>,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("servers", &self.servers)
            .finish_non_exhaustive()
    }
}

/// What one server gave at the open.
struct Opened {
    catalog: Arc<Catalog>,
    /// Its resources, when it declares `resources` (none listed when the listing failed).
    resources: Option<Vec<Resource>>,
}

impl Session {
    /// Opens the session of a subagent offered `servers` (every server of `setup` when
    /// `None`) and the own tools `narrowing` leaves, its connections answering elicitations
    /// as `elicitors` say and closed on `tasks`; each dial and listing bounded at `bound`.
    /// Why it could not be opened, in words.
    pub(crate) async fn open(
        setup: &Setup,
        servers: Option<&[String]>,
        narrowing: Option<Grants>,
        (elicitors, tasks): (Elicitors, TaskTracker),
        bound: Instant,
    ) -> Result<Self, String> {
        let servers: Vec<String> = match servers {
            Some(named) => named.to_vec(),
            None => setup.servers.keys().cloned().collect(),
        };
        let mut followed = BTreeMap::new();
        for name in &servers {
            let held = setup.servers.get(name);
            let held = held.ok_or_else(|| format!("server {name:?} is not connected"))?;
            followed.insert(name.clone(), held.followed.clone());
        }
        let workers = Workers::new(elicitors, tasks);
        workers.follow(&followed);
        let opened = servers.iter().map(|name| open(&workers, name, bound));
        let opened: Vec<Opened> = join_all(opened)
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        let listings = servers.iter().zip(&opened);
        let listings = listings.filter_map(|(s, o)| Some((s.as_str(), o.resources.as_deref()?)));
        let note = resource::note(listings);
        let resourceful = servers.iter().zip(&opened);
        let resourceful = resourceful.filter(|(_, o)| o.resources.is_some());
        let mut session = Self {
            instance: setup.instance.clone(),
            resourceful: resourceful.map(|(s, _)| s.clone()).collect(),
            catalogs: servers
                .iter()
                .cloned()
                .zip(opened.into_iter().map(|o| o.catalog))
                .collect(),
            servers,
            followed,
            workers,
            listed: note.as_ref().map(|n| n.servers.clone()).unwrap_or_default(),
            note: note.map(|n| n.text),
            narrowing,
            own: setup.own.clone(),
            offer: Offer::default(),
            collisions: Vec::new(),
        };
        session.offer = session.offered();
        Ok(session)
    }

    /// The note of its servers' resources, for its first context; `None` when they list
    /// none.
    pub(crate) fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// What its model is offered.
    pub(crate) fn offer(&self) -> &Offer {
        &self.offer
    }

    /// Its connections.
    pub(crate) fn workers(&self) -> &Workers {
        &self.workers
    }

    /// The size of its catalogue: its servers' tools.
    pub(crate) fn size(&self) -> usize {
        self.catalogs.values().map(|c| c.tools().len()).sum()
    }

    /// A turn boundary: what turns work with now is `setup`; the tools of `changed` (of its
    /// servers, those that said their tools changed) and of the servers dialed afresh since
    /// are listed again, each bounded at `bound`.
    pub(crate) async fn boundary(
        &mut self,
        setup: &Setup,
        mut changed: BTreeSet<String>,
        bound: Instant,
    ) {
        self.own = setup.own.clone();
        self.instance.clone_from(&setup.instance);
        for (name, followed) in &mut self.followed {
            if let Some(held) = setup.servers.get(name)
                && held.followed != *followed
            {
                *followed = held.followed.clone();
                changed.insert(name.clone());
            }
        }
        self.workers.follow(&self.followed);
        changed.retain(|s| self.followed.contains_key(s));
        let mut refreshed = false;
        for server in &self.servers {
            if !changed.contains(server) {
                continue;
            }
            match relist(&self.workers, server, bound).await {
                Ok(catalog) => {
                    self.catalogs.insert(server.clone(), catalog);
                    refreshed = true;
                }
                Err(e) => connections::tools_refresh_failed(&self.instance, server, &e),
            }
        }
        if refreshed {
            connections::tools_refreshed(&self.instance, self.size());
        }
        self.offer = self.offered();
    }

    /// The offer of the own tools granted to subagents that the run's narrowing leaves,
    /// `resource.read` when a server declares resources, and its servers' tools.
    fn offered(&mut self) -> Offer {
        let narrowing = self.narrowing.as_ref();
        let own = self.own.granted(Scope::Subagent).into_iter();
        let own = own.filter(|t| narrowing.is_none_or(|n| n.offers(Scope::Subagent, t.name)));
        let reads = (!self.resourceful.is_empty()).then(resource::tool);
        let served = self.servers.iter().flat_map(|s| {
            let tools = self.catalogs.get(s).map(|c| c.tools()).unwrap_or_default();
            tools.iter().map(move |t| (s.as_str(), t))
        });
        let served = served.filter(|(s, t)| !self.own.withholds(Scope::Subagent, s, &t.name));
        let (offer, collisions) = Offer::new(own.chain(reads), served);
        for c in collisions.iter().filter(|c| !self.collisions.contains(c)) {
            let (server, tool) = (c.origin.server(), c.origin.tool());
            own::tool_name_collision(&self.instance, server, tool, &c.wanted, &c.name);
        }
        self.collisions = collisions;
        offer
    }
}

/// Dials `server` over `workers` and lists what it offers.
async fn open(workers: &Workers, server: &str, bound: Instant) -> Result<Opened, String> {
    let failed = |e: &dyn fmt::Display| format!("server {server:?}: {e}");
    let connection = workers.connection(server, bound).await;
    let connection = connection.map_err(|e| failed(&e))?;
    let client = connection.client().map_err(|e| failed(&e))?;
    let resources = match client.capabilities().resources() {
        true => {
            let listed = tokio::time::timeout_at(bound, client.list_resources()).await;
            Some(listed.ok().and_then(Result::ok).unwrap_or_default())
        }
        false => None,
    };
    Ok(Opened {
        catalog: client.catalog(),
        resources,
    })
}

/// Lists the tools of `server` again over its connection in `workers`.
async fn relist(workers: &Workers, server: &str, bound: Instant) -> Result<Arc<Catalog>, String> {
    let connection = workers.connection(server, bound).await;
    let connection = connection.map_err(|e| e.to_string())?;
    let client = connection.client().map_err(|e| e.to_string())?;
    match tokio::time::timeout_at(bound, client.refresh_tools()).await {
        Ok(listed) => listed.map_err(|e| e.to_string()),
        Err(_) => Err("no answer before the turn's deadline".to_owned()),
    }
}

impl Resources for Session {
    async fn read(
        &self,
        server: Option<&str>,
        uri: &str,
    ) -> Result<(String, Vec<ResourceContents>), Error> {
        let server = match server {
            Some(named) if self.resourceful.iter().any(|s| s == named) => named,
            Some(named) => {
                return Err(Error::NotFound {
                    what: format!("server {named:?} among the subagent's that expose resources"),
                });
            }
            None => self
                .listed
                .get(uri)
                .or(self.resourceful.first())
                .ok_or_else(|| Error::NotFound {
                    what: "a server of the subagent that exposes resources".to_owned(),
                })?,
        };
        let failed = |e: &dyn fmt::Display| Error::Server {
            server: server.to_owned(),
            detail: e.to_string(),
        };
        let bound = Instant::now() + CALL_MAX;
        let connection = self.workers.connection(server, bound).await;
        let connection = connection.map_err(|e| failed(&e))?;
        let client = connection.client().map_err(|e| failed(&e))?;
        let read = client.read_resource(uri).await.map_err(|e| failed(&e))?;
        Ok((server.to_owned(), read.contents))
    }
}

/// The subagent's own tools: `resource.read` over its connections, the others agentd's.
impl OwnTools for Session {
    fn call_in<'a>(
        &'a self,
        caller: &'a Caller,
        name: &'a str,
        arguments: Value,
        turn: Option<Turn<'a>>,
    ) -> Called<'a> {
        match name {
            resource::NAME => Box::pin(async move {
                let answer = resource::call(self, arguments).await;
                self.own.told(caller, resource::tool(), &answer);
                answer
            }),
            _ => self.own.call_in(caller, name, arguments, turn),
        }
    }

    fn granted(&self, scope: Scope) -> Vec<&'static Tool> {
        self.own.granted(scope)
    }

    fn withholds(&self, scope: Scope, server: &str, tool: &str) -> bool {
        self.own.withholds(scope, server, tool)
    }
}
