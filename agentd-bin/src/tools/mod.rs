//! agentd's own tools in the daemon: `agentd_tools`' runtime ([`Tools`]) over durable
//! services ([`Durable`]) that keep their state in the store ([`crate::store`]), the
//! daemon's [`Clock`] (tokio's, its waits ending at shutdown), and the agent's parts
//! ([`Parts`]: the human gate, the instruction, the skills, the subagents and the workflows).
//!
//! `await` checks its condition again at the trait's default pace ([`Clock::changed`] is a
//! sleep of at most [`agentd_tools::wait::POLL`]): the store answers one request at a time on
//! its thread, and a check is one read there.
//!
//! A contract tool (`knowledge.*`, `search.*`, `code.run`, `exec`) is offered when
//! configuration implements it ([`crate::config::Contracts`]) and granted; a mapped one is
//! called through the supervisor's tool registry ([`Registry`]), as a workflow `tool` step
//! naming `server/tool` is. The list of the tools offered to a scope ([`Own::offered`]) also
//! names the contract tools granted to it that are not offered, and why.
//!
//! Every call goes through [`Own::call`], the events tools' too (made over the [`Control`]
//! of the running MCP Events, for an owner: [`Events`]), which writes a `tool.call` line at
//! debug (the tool, the scope, the unit and the outcome: `ok` or the error's code; never the
//! arguments or the values) and counts it in `agent_tool_calls_total{tool, outcome}` (a
//! name no tool has is `unknown` there).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentd_tools::artifact::{Artifact, Artifacts, Listed};
use agentd_tools::finish::{Outcome, Units};
use agentd_tools::memory::{End, Entry, Memory, Page, Taken, Versioned};
use agentd_tools::message::{Message, Messages};
use agentd_tools::plan::{Plan, Plans, Step, Update};
use agentd_tools::status::{Budget, Inbox, Report, Status};
use agentd_tools::wait::{Record, Streams};
use agentd_tools::{AgentMeta, Caller, Error, Scope, Services, Tool, Tools, contract};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::agent::calls::{self, Called, OwnTools, Turn};
use crate::agent::instruction::Instruction;
use crate::agent::skills::Skills;
use crate::agent::subagents::Subagents;
use crate::clock::Clock;
use crate::config::{Config, Contracts, Implementation};
use crate::events::Control;
use crate::human::Gate;
use crate::registry::Registry;
use crate::store::{self, Store, units};
use crate::telemetry::catalogue::own;
use crate::telemetry::metrics::Metrics;
use crate::workflows::{self, Boxed, Workflows};

/// The agent's parts the tools act on.
#[derive(Debug, Clone)]
pub(crate) struct Parts {
    /// The questions to people: the daemon's one gate, kept across reloads.
    pub(crate) humans: Arc<Gate>,
    /// The instruction.
    pub(crate) instruction: Instruction,
    /// The skills.
    pub(crate) skills: Skills,
    /// The subagents.
    pub(crate) subagents: Subagents,
    /// The workflows and their runs.
    pub(crate) workflows: Workflows,
    /// The held servers, as the supervisor's tool registry reaches them.
    pub(crate) servers: Arc<dyn workflows::Servers>,
    /// The soft `RLIMIT_NOFILE` `exec`'s commands are given back: the one the daemon
    /// started with (`None`: they keep the daemon's).
    #[cfg_attr(
        not(feature = "exec"),
        allow(dead_code, reason = "only exec's commands are given it")
    )]
    pub(crate) nofile: Option<u64>,
}

/// The own tools of the daemon, offered as `[tools.grants]` says: every call logged and
/// counted.
#[derive(Debug)]
pub(crate) struct Own {
    tools: Tools<Durable>,
    metrics: Arc<Metrics>,
    /// The contract tools' implementations.
    contracts: Contracts,
    /// The supervisor's tool registry.
    registry: Registry,
}

impl Own {
    /// The tools of `config` (offered as its `[tools.grants]` say, for its instance, whose
    /// `status` they name) over `store` and the agent's `parts`; their waits end at
    /// `shutdown`.
    pub(crate) fn new(
        store: Store,
        config: &Config,
        shutdown: CancellationToken,
        metrics: Arc<Metrics>,
        events_degraded: Arc<AtomicBool>,
        parts: Parts,
    ) -> Self {
        let registry = Registry::new(
            config,
            parts.servers,
            parts.workflows.clone(),
            store.clone(),
            crate::clock::random_bytes,
        );
        let durable = Durable {
            store,
            instance: config.instance.clone(),
            max_value_bytes: config.max_value_bytes,
            budget_tokens: config.budget_tokens,
            degraded: AtomicBool::new(false),
            events_degraded,
            clock: Clock::new(shutdown),
            humans: parts.humans,
            instruction: parts.instruction,
            skills: parts.skills,
            subagents: parts.subagents,
            workflows: parts.workflows,
            #[cfg(feature = "exec")]
            exec: config
                .exec
                .clone()
                .map(|policy| crate::exec::Runner::new(&config.store_path, policy, parts.nofile)),
        };
        Self {
            tools: Tools::new(durable, config.tool_grants.clone()),
            metrics,
            contracts: config.contracts.clone(),
            registry,
        }
    }

    /// Calls `name` for `caller` with `arguments`, an events tool when `events` is given
    /// (called as its owner, a caller of the grant of `caller`'s scope); logs the call
    /// (`tool.call`) and counts it.
    pub(crate) async fn call(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Value,
        events: Option<Events<'_>>,
    ) -> Result<Value, Error> {
        let answer = match events {
            Some(Events { control, owner }) => {
                let who = agentd_tools::events::Caller::new(caller.scope.into(), owner);
                agentd_tools::events::call(control, who, name, arguments).await
            }
            None => match self.contract(caller, name, arguments, None, never()).await {
                Ok(answer) => answer,
                Err(arguments) => self.tools.call(caller, name, arguments).await,
            },
        };
        self.told(caller, name, answer)
    }

    /// Calls `name` for `caller` with `arguments` in a model's `turn`, the model-only tools
    /// reasoning over its model, a contract's registry call carrying its `_meta`; logs the
    /// call (`tool.call`) and counts it.
    pub(crate) async fn call_in(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Value,
        turn: Option<Turn<'_>>,
    ) -> Result<Value, Error> {
        let meta = turn.map(|t| t.meta);
        let bound = turn.map(|t| t.bound);
        let answer = match self
            .contract(caller, name, arguments, meta, until(bound))
            .await
        {
            Ok(answer) => answer,
            Err(arguments) => {
                let in_turn = turn.map(|t| t.for_tools());
                let called = self.tools.call_in(caller, name, arguments, in_turn);
                calls::bounded(name, bound, called).await
            }
        };
        self.told(caller, name, answer)
    }

    /// The answer of contract tool `name` called by `caller`: `not_granted` when it is not
    /// granted to the caller's scope, `not_offered` (with the reason) when nothing
    /// implements it, `invalid_arguments` when the arguments do not fit its schema, else the
    /// mapped tool's result through the registry (in the turn whose call's `_meta` is
    /// `turn`, when given), cancelled on the wire when `stop` completes. `Err(arguments)`,
    /// given back, for a tool that is no contract or one the local runner implements: the
    /// own tools run it.
    async fn contract(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Value,
        turn: Option<&AgentMeta>,
        stop: impl Future<Output = ()> + Send,
    ) -> Result<Result<Value, Error>, Value> {
        let Some(tool) = agentd_tools::tool(name).filter(|t| contract::is_contract(t.name)) else {
            return Err(arguments);
        };
        if !self.tools.grants().offers(caller.scope, name) {
            return Ok(Err(Error::NotGranted {
                tool: name.to_owned(),
                scope: Some(caller.scope),
            }));
        }
        let mapping = match self.contracts.implementation(name) {
            Ok(Implementation::Mapped(mapping)) => mapping,
            Ok(Implementation::Local) => return Err(arguments),
            Err(reason) => {
                let tool = name.to_owned();
                return Ok(Err(Error::NotOffered { tool, reason }));
            }
        };
        if let Err(e) = tool.check(&arguments) {
            return Ok(Err(e));
        }
        let (server, tool) = (&mapping.server, &mapping.tool);
        Ok(self
            .registry
            .call(caller, turn, server, tool, arguments, stop)
            .await)
    }

    /// `answer`, the call of `name` by `caller` logged and counted.
    fn told(
        &self,
        caller: &Caller,
        name: &str,
        answer: Result<Value, Error>,
    ) -> Result<Value, Error> {
        // A name no tool has is counted under `unknown`: the series stay a known few.
        let tool = agentd_tools::tool(name).map_or("unknown", |t| t.name);
        self.record(caller, tool, &answer);
        answer
    }

    /// Logs (`tool.call`) and counts the call of `tool` by `caller` that answered `answer`.
    fn record(&self, caller: &Caller, tool: &'static str, answer: &Result<Value, Error>) {
        let outcome = match answer {
            Ok(_) => "ok",
            Err(e) => e.code(),
        };
        let instance = &self.tools.services().instance;
        own::tool_call(
            instance,
            tool,
            caller.scope.as_str(),
            &caller.unit(),
            outcome,
        );
        self.metrics.tool_call(tool, outcome);
    }

    /// The tools offered to `scope`: the own tools granted and built, and the contract tools
    /// granted and implemented.
    pub(crate) fn granted(&self, scope: Scope) -> impl Iterator<Item = &'static Tool> + '_ {
        let own = self
            .tools
            .offered(scope)
            .filter(|t| !contract::is_contract(t.name));
        let contracts = self
            .contracts(scope)
            .filter_map(|(tool, implemented)| implemented.ok().map(|_| tool));
        own.chain(contracts)
    }

    /// The contract tools granted to `scope`, each with its implementation or why it has
    /// none.
    fn contracts(
        &self,
        scope: Scope,
    ) -> impl Iterator<Item = (&'static Tool, Result<Implementation<'_>, String>)> + '_ {
        contract::TOOLS
            .into_iter()
            .filter(move |name| self.tools.grants().offers(scope, name))
            .filter_map(agentd_tools::tool)
            .map(|tool| (tool, self.contracts.implementation(tool.name)))
    }

    /// The tools of `scope`, as `{"list": SCOPE}` answers: `{"tools": [{"name",
    /// "description", "inputSchema", "grants"}], "not_offered": [{"name", "description",
    /// "reason"}]}`, the tools offered (`grants`: who each is granted to by default), then
    /// the contract tools granted to `scope` that nothing implements, with why.
    pub(crate) fn listed(&self, scope: Scope) -> Value {
        let offered: Vec<Value> = self
            .granted(scope)
            .map(|t| {
                let grants: Vec<&str> = t.grants.iter().map(|g| g.as_str()).collect();
                json!({
                    "name": t.name,
                    "description": t.does,
                    "inputSchema": t.input_schema,
                    "grants": grants,
                })
            })
            .collect();
        let not_offered: Vec<Value> = self
            .contracts(scope)
            .filter_map(|(t, implemented)| {
                let reason = implemented.err()?;
                Some(json!({"name": t.name, "description": t.does, "reason": reason}))
            })
            .collect();
        json!({"tools": offered, "not_offered": not_offered})
    }
}

/// Where an events tool's call goes: the events tools of the running MCP Events, called
/// for `owner` (whose `[[events.grants]]` entry says whether they are offered).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Events<'a> {
    /// The events tools.
    pub(crate) control: &'a Control,
    /// Whose call it is.
    pub(crate) owner: &'a str,
}

/// The services of the tools over the store: memory, artifacts, plans, inboxes, streams,
/// finished units and the instance's status, and the human gate's questions. The store is
/// *degraded* while its last request failed of its own fault (a `store` error); the next that
/// succeeds clears it.
#[derive(Debug)]
pub(crate) struct Durable {
    store: Store,
    instance: String,
    max_value_bytes: usize,
    /// `limits.budget_tokens`, which `status` tells.
    budget_tokens: Option<u64>,
    degraded: AtomicBool,
    /// Whether MCP Events' last commit failed, as it reported to the supervisor.
    events_degraded: Arc<AtomicBool>,
    clock: Clock,
    /// The questions to people: the daemon's one gate, kept across reloads.
    humans: Arc<Gate>,
    instruction: Instruction,
    skills: Skills,
    subagents: Subagents,
    workflows: Workflows,
    /// The local command runner of `exec`, when `security.exec.enabled` says so.
    #[cfg(feature = "exec")]
    exec: Option<crate::exec::Runner>,
}

/// What a store request was about, for the tools' errors that name it.
#[derive(Clone, Copy)]
struct About<'a> {
    tool: &'static str,
    key: &'a str,
}

impl Durable {
    /// The store's answer `answer` to a request for `about`, its error as the tools say it.
    fn answer<T>(&self, about: About<'_>, answer: Result<T, store::Error>) -> Result<T, Error> {
        let degraded = matches!(&answer, Err(e) if e.code() == "store");
        self.degraded.store(degraded, Ordering::Relaxed);
        answer.map_err(|e| e.into_tool(about.tool, about.key))
    }
}

/// A request about `key`, for `tool`.
fn about<'a>(tool: &'static str, key: &'a str) -> About<'a> {
    About { tool, key }
}

fn size(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

impl Memory for Durable {
    fn max_value_bytes(&self) -> usize {
        self.max_value_bytes
    }

    async fn get(&self, key: &str) -> Result<Option<Versioned>, Error> {
        let got = self.store.memory_get(key).await;
        let got = self.answer(about("memory.get", key), got)?;
        Ok((got.version > 0).then(|| Versioned::new(got.value, got.version)))
    }

    async fn set(&self, key: &str, value: Value, expected: Option<u64>) -> Result<u64, Error> {
        let set = self.store.memory_set(key, value, expected).await;
        self.answer(about("memory.set", key), set)
    }

    async fn list(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Page, Error> {
        let page = self.store.memory_list(prefix, after, Some(limit)).await;
        let page = self.answer(about("memory.list", prefix), page)?;
        let more = page.next.is_some();
        let keys = page
            .keys
            .into_iter()
            .map(|k| Entry::new(k.key, k.version, size(k.bytes)))
            .collect();
        Ok(Page::new(keys, more))
    }

    async fn push(&self, key: &str, value: Value) -> Result<(usize, u64), Error> {
        let pushed = self.store.memory_push(key, value).await;
        let pushed = self.answer(about("memory.push", key), pushed)?;
        Ok((size(pushed.length), pushed.version))
    }

    async fn take(&self, key: &str, end: End) -> Result<Taken, Error> {
        let (tool, taken) = match end {
            End::First => ("memory.shift", self.store.memory_shift(key).await),
            End::Last => ("memory.pop", self.store.memory_pop(key).await),
        };
        let taken = self.answer(about(tool, key), taken)?;
        Ok(match taken.value {
            Some(value) => Taken::Item(Versioned::new(value, taken.version)),
            None => Taken::Empty {
                version: taken.version,
            },
        })
    }

    async fn delete(&self, key: &str) -> Result<bool, Error> {
        let deleted = self.store.memory_delete(key).await;
        self.answer(about("memory.delete", key), deleted)
    }
}

impl Artifacts for Durable {
    async fn create(&self, unit: &str, artifact: Artifact) -> Result<(), Error> {
        let made = self
            .store
            .artifact_create(unit, &artifact.name, &artifact.media_type, artifact.content)
            .await;
        self.answer(about("artifact.create", &artifact.name), made)
            .map(drop)
    }

    async fn get(&self, unit: &str, name: &str) -> Result<Option<Artifact>, Error> {
        match self.store.artifact_get(unit, name).await {
            Err(store::Error::NotFound { .. }) => Ok(None),
            got => {
                let a = self.answer(about("artifact.get", name), got)?;
                Ok(Some(Artifact::new(&a.name, &a.media_type, a.content)))
            }
        }
    }

    async fn delete(&self, unit: &str, name: &str) -> Result<bool, Error> {
        let deleted = self.store.artifact_delete(unit, name).await;
        self.answer(about("artifact.delete", name), deleted)
    }

    async fn list(&self, unit: &str) -> Result<Vec<Listed>, Error> {
        let listed = self.store.artifact_list(unit).await;
        let listed = self.answer(about("artifact.list", unit), listed)?;
        Ok(listed
            .iter()
            .map(|a| Listed::new(&a.name, &a.media_type, size(a.bytes)))
            .collect())
    }
}

impl Plans for Durable {
    async fn get(&self, unit: &str) -> Result<Option<Plan>, Error> {
        let plan = self.store.plan_get(unit).await;
        self.answer(about("plan.get", unit), plan)
    }

    async fn create(&self, unit: &str, steps: Vec<Step>) -> Result<Plan, Error> {
        let made = self.store.plan_create(unit, steps).await;
        self.answer(about("plan.create", unit), made)
    }

    async fn update(&self, unit: &str, update: Update) -> Result<Plan, Error> {
        let updated = self.store.plan_update(unit, update).await;
        self.answer(about("plan.update", unit), updated)
    }

    async fn clear(&self, unit: &str) -> Result<bool, Error> {
        let cleared = self.store.plan_clear(unit).await;
        self.answer(about("plan.clear", unit), cleared)
    }
}

impl Messages for Durable {
    async fn send(
        &self,
        conversation: &str,
        from: &str,
        text: &str,
        at_ms: i64,
    ) -> Result<u64, Error> {
        let sent = self
            .store
            .message_send(conversation, from, text, at_ms)
            .await;
        self.answer(about("message.send", conversation), sent)
    }

    async fn after(&self, conversation: &str, after: u64) -> Result<Option<Message>, Error> {
        let read = self.store.messages(conversation, after, 1).await;
        let read = self.answer(about("await", conversation), read)?;
        Ok(read
            .first()
            .map(|m| Message::new(m.id, &m.sender, &m.text, m.at_ms)))
    }
}

impl Streams for Durable {
    async fn after(&self, name: &str, after: u64) -> Result<Option<Record>, Error> {
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let read = self.store.read(name, after, 1).await;
        let read = self.answer(about("await", name), read)?;
        let Some(entry) = read.into_iter().next() else {
            return Ok(None);
        };
        let data = serde_json::from_slice(&entry.bytes).map_err(|e| Error::Store {
            detail: format!("a record of {name:?} is not JSON: {e}"),
        })?;
        Ok(Some(Record::new(
            u64::try_from(entry.seq).unwrap_or(0),
            data,
        )))
    }
}

impl Units for Durable {
    async fn finish(
        &self,
        unit: &str,
        outcome: Outcome,
        summary: &str,
        at_ms: i64,
    ) -> Result<(), Error> {
        let outcome = units::Outcome::parse(outcome.as_str()).ok_or_else(|| Error::Store {
            detail: format!("the store keeps no finish {:?}", outcome.as_str()),
        })?;
        let finished = self.store.finish(unit, outcome, summary, at_ms).await;
        self.answer(about("finish", unit), finished).map(drop)
    }
}

impl Status for Durable {
    async fn report(&self) -> Result<Report, Error> {
        let status = self.store.status().await;
        let status = self.answer(about("status", ""), status)?;
        let mut report = Report::default();
        report.instance.clone_from(&self.instance);
        report.conversations = status
            .conversations
            .iter()
            .map(|c| Inbox::new(&c.id, c.inbox, c.tokens))
            .collect();
        let tokens = status.conversations.iter().map(|c| c.tokens);
        report.budget = Budget::of(tokens, self.budget_tokens);
        report.units_finished = status.units_finished;
        report.store_bytes = status.bytes;
        report.degraded =
            self.degraded.load(Ordering::Relaxed) || self.events_degraded.load(Ordering::Relaxed);
        Ok(report)
    }
}

impl Services for Durable {
    type Memory = Self;
    type Artifacts = Self;
    type Plans = Self;
    type Messages = Self;
    type Streams = Self;
    type Units = Self;
    type Status = Self;
    type Humans = Gate;
    type Clock = Clock;
    type Instruction = Instruction;
    type Skills = Skills;
    type Subagents = Subagents;
    type Workflows = Workflows;

    fn memory(&self) -> &Self {
        self
    }
    fn artifacts(&self) -> &Self {
        self
    }
    fn plans(&self) -> &Self {
        self
    }
    fn messages(&self) -> &Self {
        self
    }
    fn streams(&self) -> &Self {
        self
    }
    fn units(&self) -> &Self {
        self
    }
    fn status(&self) -> &Self {
        self
    }
    fn humans(&self) -> &Gate {
        &self.humans
    }
    fn clock(&self) -> &Clock {
        &self.clock
    }
    fn instruction(&self) -> &Instruction {
        &self.instruction
    }
    fn skills(&self) -> &Skills {
        &self.skills
    }
    fn subagents(&self) -> &Subagents {
        &self.subagents
    }
    fn workflows(&self) -> &Workflows {
        &self.workflows
    }
    #[cfg(feature = "exec")]
    fn exec(&self) -> Option<&dyn agentd_tools::exec::Exec> {
        self.exec.as_ref().map(|runner| runner as _)
    }
}

#[cfg(test)]
pub(crate) mod tests;

/// The agent's turns call the own tools as the operator's calls do: logged and counted.
impl OwnTools for Own {
    fn call_in<'a>(
        &'a self,
        caller: &'a Caller,
        name: &'a str,
        arguments: Value,
        turn: Option<Turn<'a>>,
    ) -> Called<'a> {
        Box::pin(Self::call_in(self, caller, name, arguments, turn))
    }

    fn granted(&self, scope: Scope) -> Vec<&'static Tool> {
        Self::granted(self, scope).collect()
    }

    fn withholds(&self, scope: Scope, server: &str, tool: &str) -> bool {
        let grants = self.tools.grants();
        let mut implemented = self.contracts.implemented_by(server, tool);
        implemented.any(|contract| !grants.offers(scope, contract))
    }

    fn told(&self, caller: &Caller, tool: &'static Tool, answer: &Result<Value, Error>) {
        self.record(caller, tool.name, answer);
    }
}

/// A workflow's `tool` steps call the own tools as the operator's calls do: logged and
/// counted; a step naming `server/tool` calls that tool through the registry, logged and
/// counted too (under `unknown`, as no own tool's name).
impl workflows::Tools for Own {
    fn call<'a>(
        &'a self,
        caller: &'a Caller,
        name: &'a str,
        arguments: Value,
        stop: Boxed<'a, ()>,
    ) -> Boxed<'a, Result<Value, Error>> {
        match contract::registry_tool(name) {
            Some((server, tool)) => Box::pin(async move {
                let answer = match OwnTools::withholds(self, caller.scope, server, tool) {
                    true => Err(Error::NotGranted {
                        tool: name.to_owned(),
                        scope: Some(caller.scope),
                    }),
                    false => {
                        let called = self
                            .registry
                            .call(caller, None, server, tool, arguments, stop);
                        called.await
                    }
                };
                self.told(caller, name, answer)
            }),
            None => Box::pin(async move {
                tokio::select! {
                    answer = Self::call(self, caller, name, arguments, None) => answer,
                    // The step, cut or given up, says why.
                    () = stop => Err(Error::ShuttingDown),
                }
            }),
        }
    }
}

/// Completes at `bound`, when given; else never.
async fn until(bound: Option<tokio::time::Instant>) {
    match bound {
        Some(bound) => tokio::time::sleep_until(bound).await,
        None => never().await,
    }
}

/// A future that never completes: no bound but the connection's own.
async fn never() {
    std::future::pending::<()>().await;
}
