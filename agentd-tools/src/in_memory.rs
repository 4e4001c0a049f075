//! In-memory services: every service trait over one lock, with a virtual clock. They are
//! the reference semantics a durable implementation matches (the checks of
//! [`testing`](crate::testing) pass on both), and the services of tests.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use serde_json::Value;

use crate::artifact::{Artifact, Artifacts, Listed};
use crate::finish::{Outcome, Units};
use crate::human::{self, Humans, Origin, Question, Reply};
use crate::instruction::{Current, Instruction, Source};
use crate::memory::{self, End, Entry, Memory, Page, Taken, Versioned};
use crate::message::{Message, Messages};
use crate::plan::{Plan, Plans, Step, Update};
use crate::skills::{Loaded, LoadedSet, Said, Skill, Skills};
use crate::status::{Budget, Inbox, Report, Status};
use crate::subagent::{Spec, State as Standing, Subagent, Subagents};
use crate::wait::{Clock, Record, Streams, Woke};
use crate::workflow::in_memory::Runs;
use crate::workflow::{self, Command, Defined, Definition, Filter, Workflows};
use crate::{Error, Services};

/// Every service in memory. Its clock is virtual: it starts at 0 (or [`at`](Self::at)),
/// a sleep moves it on at once by its duration, and after [`shut_down`](Self::shut_down)
/// every sleep ends at once as [`Woke::ShuttingDown`].
///
/// A question asked ([`Humans::ask`]) waits until it is answered, until the clock is moved
/// past its timeout (by [`advance`](Self::advance), or another caller's sleep), or until
/// shutdown: nothing else moves the clock while it waits.
///
/// ```
/// use agentd_tools::in_memory::InMemory;
/// use agentd_tools::memory::Memory;
///
/// # run_now(async {
/// let services = InMemory::new("my-agent");
/// assert_eq!(services.set("k", 1.into(), None).await, Ok(1));
/// assert_eq!(services.set("k", 2.into(), Some(0)).await.unwrap_err().code(), "version_mismatch");
/// # });
/// # fn run_now(f: impl Future<Output = ()>) {
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// #     assert!(f.as_mut().poll(&mut cx).is_ready());
/// # }
/// ```
#[derive(Debug)]
pub struct InMemory {
    instance: String,
    max_value_bytes: usize,
    now_ms: AtomicI64,
    shutting_down: AtomicBool,
    state: Mutex<State>,
    runs: Runs,
}

#[derive(Debug, Default)]
struct State {
    memory: BTreeMap<String, Versioned>,
    artifacts: BTreeMap<String, BTreeMap<String, Artifact>>,
    plans: BTreeMap<String, Plan>,
    inboxes: BTreeMap<String, Vec<Message>>,
    streams: BTreeMap<String, Vec<Record>>,
    finished: BTreeMap<String, (Outcome, String, i64)>,
    questions: BTreeMap<u64, Asked>,
    /// Moves on at every answer, move of the clock and shutdown: what waiting askers wait for.
    generation: u64,
    wakers: Vec<Waker>,
    /// The text of each resource an instruction may be read from, by server and URI.
    resources: BTreeMap<(String, String), String>,
    instruction: Current,
    /// The catalogue, each skill with the messages loading it gives (each `{argument}` in
    /// them replaced by the argument's value).
    skills: Vec<(Skill, Vec<Said>)>,
    loaded: BTreeMap<String, LoadedSet>,
    /// The subagents, by id.
    subagents: BTreeMap<String, Child>,
}

/// A subagent: its status, the messages it was sent (its goal first), and how long each
/// of its runs may take.
#[derive(Debug)]
struct Child {
    status: Subagent,
    said: Vec<String>,
    deadline: Option<Duration>,
}

/// A question and how it stands.
#[derive(Debug)]
struct Asked {
    question: Question,
    /// `None` while open.
    ended: Option<Ended>,
}

#[derive(Debug)]
enum Ended {
    Answered(Value),
    Withdrawn,
}

impl InMemory {
    /// Empty services of instance `instance`, values bounded at
    /// [`VALUE_MAX_DEFAULT`](memory::VALUE_MAX_DEFAULT).
    pub fn new(instance: &str) -> Self {
        Self {
            instance: instance.to_owned(),
            max_value_bytes: memory::VALUE_MAX_DEFAULT,
            now_ms: AtomicI64::new(0),
            shutting_down: AtomicBool::new(false),
            state: Mutex::default(),
            runs: Runs::default(),
        }
    }

    /// The same, values bounded at `max` bytes.
    pub fn with_max_value_bytes(mut self, max: usize) -> Self {
        self.max_value_bytes = max;
        self
    }

    /// The same, its clock at `now_ms`.
    pub fn at(self, now_ms: i64) -> Self {
        self.now_ms.store(now_ms, Ordering::SeqCst);
        self
    }

    /// Moves the clock on by `by`.
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        let now = self
            .now_ms
            .fetch_add(by, Ordering::SeqCst)
            .saturating_add(by);
        self.runs.tick(now);
        self.changed_now();
    }

    /// The workflows' runs: what their steps wait for, and where tests tell outcomes.
    pub fn runs(&self) -> &Runs {
        &self.runs
    }

    /// From now on, every wait ends as [`Woke::ShuttingDown`] (and every question waited for
    /// is withdrawn).
    pub fn shut_down(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.changed_now();
    }

    /// Wakes every waiting asker.
    fn changed_now(&self) {
        let wakers = {
            let mut state = self.lock();
            state.generation += 1;
            std::mem::take(&mut state.wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Appends `data` to stream `name`; its sequence number (from 1).
    pub fn append(&self, name: &str, data: Value) -> u64 {
        let mut state = self.lock();
        let stream = state.streams.entry(name.to_owned()).or_default();
        let seq = stream.len() as u64 + 1;
        stream.push(Record::new(seq, data));
        seq
    }

    /// Resource `uri` of `server` holds `text` from now on, for the instruction to follow.
    pub fn resource(&self, server: &str, uri: &str, text: &str) {
        let key = (server.to_owned(), uri.to_owned());
        self.lock().resources.insert(key, text.to_owned());
    }

    /// Offers `skill`, loaded as `messages` (each `{argument}` in them replaced by the
    /// argument's value).
    pub fn skill(&self, skill: Skill, messages: Vec<Said>) {
        self.lock().skills.push((skill, messages));
    }

    /// Subagent `id` settles as `state`, having answered `answer`, as if its turns ran; the
    /// messages it was sent, its goal first. Nothing runs an in-memory subagent: it runs
    /// until this, or until it is killed.
    pub fn settle(&self, id: &str, state: Standing, answer: Option<&str>) -> Vec<String> {
        let mut guard = self.lock();
        let Some(child) = guard.subagents.get_mut(id) else {
            return Vec::new();
        };
        child.status.state = state;
        child.status.turns += 1;
        child.status.answer = answer.map(str::to_owned);
        let said = child.said.clone();
        drop(guard);
        self.changed_now();
        said
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic under the lock leaves maps that are still whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Services for InMemory {
    type Memory = Self;
    type Artifacts = Self;
    type Plans = Self;
    type Messages = Self;
    type Streams = Self;
    type Units = Self;
    type Status = Self;
    type Humans = Self;
    type Clock = Self;
    type Instruction = Self;
    type Skills = Self;
    type Subagents = Self;
    type Workflows = Self;

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
    fn humans(&self) -> &Self {
        self
    }
    fn clock(&self) -> &Self {
        self
    }
    fn instruction(&self) -> &Self {
        self
    }
    fn skills(&self) -> &Self {
        self
    }
    fn subagents(&self) -> &Self {
        self
    }
    fn workflows(&self) -> &Self {
        self
    }
}

impl Workflows for InMemory {
    async fn create(&self, definition: Definition) -> Result<Defined, Error> {
        self.runs.create(definition)
    }

    async fn update(&self, definition: Definition) -> Result<Defined, Error> {
        self.runs.update(definition)
    }

    async fn delete(&self, name: &str) -> Result<bool, Error> {
        self.runs.delete(name)
    }

    async fn run(&self, workflow: &str, input: Value, by: &str) -> Result<workflow::Record, Error> {
        self.runs.run(workflow, input, by, self.now_ms())
    }

    async fn status(&self, run: &str) -> Result<workflow::Record, Error> {
        self.runs.status(run)
    }

    async fn list(&self, filter: Filter) -> Result<workflow::Page, Error> {
        self.runs.list(&filter)
    }

    async fn command(&self, run: &str, command: Command) -> Result<workflow::Record, Error> {
        self.runs.command(run, command, self.now_ms())
    }
}

fn mismatch(key: &str, current: u64) -> Error {
    Error::VersionMismatch {
        key: key.to_owned(),
        current,
    }
}

impl Memory for InMemory {
    fn max_value_bytes(&self) -> usize {
        self.max_value_bytes
    }

    async fn get(&self, key: &str) -> Result<Option<Versioned>, Error> {
        Ok(self.lock().memory.get(key).cloned())
    }

    async fn set(&self, key: &str, value: Value, expected: Option<u64>) -> Result<u64, Error> {
        memory::check_key(key)?;
        memory::check_value("value", &value, self.max_value_bytes)?;
        let mut state = self.lock();
        let current = state.memory.get(key).map_or(0, |v| v.version);
        if expected.is_some_and(|e| e != current) {
            return Err(mismatch(key, current));
        }
        state
            .memory
            .insert(key.to_owned(), Versioned::new(value, current + 1));
        Ok(current + 1)
    }

    async fn list(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Page, Error> {
        let state = self.lock();
        let from = match after {
            Some(after) if after >= prefix => Bound::Excluded(after),
            _ => Bound::Included(prefix),
        };
        let mut keys = state
            .memory
            .range::<str, _>((from, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| Entry::new(k.clone(), v.version, memory::serialized_len(&v.value)));
        let page: Vec<Entry> = keys.by_ref().take(limit).collect();
        let more = keys.next().is_some();
        Ok(Page::new(page, more))
    }

    async fn push(&self, key: &str, value: Value) -> Result<(usize, u64), Error> {
        memory::check_key(key)?;
        let mut state = self.lock();
        let (mut array, version) = match state.memory.get(key) {
            None => (Vec::new(), 0),
            Some(Versioned {
                value: Value::Array(items),
                version,
            }) => (items.clone(), *version),
            Some(_) => {
                return Err(Error::NotAnArray {
                    key: key.to_owned(),
                });
            }
        };
        array.push(value);
        let array = Value::Array(array);
        memory::check_value("value", &array, self.max_value_bytes)?;
        let length = array.as_array().map_or(0, Vec::len);
        state
            .memory
            .insert(key.to_owned(), Versioned::new(array, version + 1));
        Ok((length, version + 1))
    }

    async fn take(&self, key: &str, end: End) -> Result<Taken, Error> {
        let mut state = self.lock();
        let Some(entry) = state.memory.get_mut(key) else {
            return Ok(Taken::Empty { version: 0 });
        };
        let Value::Array(items) = &mut entry.value else {
            return Err(Error::NotAnArray {
                key: key.to_owned(),
            });
        };
        let item = match end {
            _ if items.is_empty() => None,
            End::First => Some(items.remove(0)),
            End::Last => items.pop(),
        };
        Ok(match item {
            None => Taken::Empty {
                version: entry.version,
            },
            Some(item) => {
                entry.version += 1;
                Taken::Item(Versioned::new(item, entry.version))
            }
        })
    }

    async fn delete(&self, key: &str) -> Result<bool, Error> {
        Ok(self.lock().memory.remove(key).is_some())
    }
}

impl Artifacts for InMemory {
    async fn create(&self, unit: &str, artifact: Artifact) -> Result<(), Error> {
        let mut state = self.lock();
        let unit = state.artifacts.entry(unit.to_owned()).or_default();
        unit.insert(artifact.name.clone(), artifact);
        Ok(())
    }

    async fn get(&self, unit: &str, name: &str) -> Result<Option<Artifact>, Error> {
        Ok(self
            .lock()
            .artifacts
            .get(unit)
            .and_then(|a| a.get(name))
            .cloned())
    }

    async fn delete(&self, unit: &str, name: &str) -> Result<bool, Error> {
        let mut state = self.lock();
        Ok(state
            .artifacts
            .get_mut(unit)
            .is_some_and(|a| a.remove(name).is_some()))
    }

    async fn list(&self, unit: &str) -> Result<Vec<Listed>, Error> {
        let state = self.lock();
        let all = state
            .artifacts
            .get(unit)
            .into_iter()
            .flat_map(|a| a.values());
        Ok(all
            .map(|a| Listed::new(&a.name, &a.media_type, a.content.len()))
            .collect())
    }
}

impl Plans for InMemory {
    async fn get(&self, unit: &str) -> Result<Option<Plan>, Error> {
        Ok(self.lock().plans.get(unit).cloned())
    }

    async fn create(&self, unit: &str, steps: Vec<Step>) -> Result<Plan, Error> {
        let mut state = self.lock();
        if state.plans.contains_key(unit) {
            return Err(Error::Exists {
                what: format!("the plan of {unit}"),
            });
        }
        let plan = Plan::new(steps, 1);
        state.plans.insert(unit.to_owned(), plan.clone());
        Ok(plan)
    }

    async fn update(&self, unit: &str, update: Update) -> Result<Plan, Error> {
        let mut state = self.lock();
        let plan = state.plans.get_mut(unit).ok_or_else(|| Error::NotFound {
            what: format!("plan of {unit}"),
        })?;
        match update {
            Update::Steps(steps) => plan.steps = steps,
            Update::Step {
                index,
                status,
                title,
            } => {
                let step = plan.steps.get_mut(index).ok_or_else(|| Error::NotFound {
                    what: format!("step {index}"),
                })?;
                if let Some(status) = status {
                    step.status = status;
                }
                if let Some(title) = title {
                    step.title = title;
                }
            }
        }
        plan.version += 1;
        Ok(plan.clone())
    }

    async fn clear(&self, unit: &str) -> Result<bool, Error> {
        Ok(self.lock().plans.remove(unit).is_some())
    }
}

impl Messages for InMemory {
    async fn send(
        &self,
        conversation: &str,
        from: &str,
        text: &str,
        at_ms: i64,
    ) -> Result<u64, Error> {
        let mut state = self.lock();
        let inbox = state.inboxes.entry(conversation.to_owned()).or_default();
        let id = inbox.len() as u64 + 1;
        inbox.push(Message::new(id, from, text, at_ms));
        Ok(id)
    }

    async fn after(&self, conversation: &str, after: u64) -> Result<Option<Message>, Error> {
        let state = self.lock();
        let inbox = state.inboxes.get(conversation);
        Ok(inbox.and_then(|i| i.iter().find(|m| m.id > after)).cloned())
    }
}

impl Streams for InMemory {
    async fn after(&self, name: &str, after: u64) -> Result<Option<Record>, Error> {
        let state = self.lock();
        let stream = state.streams.get(name);
        Ok(stream
            .and_then(|s| s.iter().find(|r| r.seq > after))
            .cloned())
    }
}

impl Units for InMemory {
    async fn finish(
        &self,
        unit: &str,
        outcome: Outcome,
        summary: &str,
        at_ms: i64,
    ) -> Result<(), Error> {
        let mut state = self.lock();
        if state.finished.contains_key(unit) {
            return Err(Error::AlreadyFinished {
                unit: unit.to_owned(),
            });
        }
        state
            .finished
            .insert(unit.to_owned(), (outcome, summary.to_owned(), at_ms));
        Ok(())
    }
}

impl Status for InMemory {
    async fn report(&self) -> Result<Report, Error> {
        let state = self.lock();
        let memory: usize = state
            .memory
            .iter()
            .map(|(k, v)| k.len() + memory::serialized_len(&v.value))
            .sum();
        let artifacts: usize = state
            .artifacts
            .values()
            .flat_map(|a| a.values())
            .map(|a| a.content.len())
            .sum();
        let messages: usize = state.inboxes.values().flatten().map(|m| m.text.len()).sum();
        Ok(Report {
            instance: self.instance.clone(),
            conversations: state
                .inboxes
                .iter()
                .map(|(id, inbox)| Inbox::new(id, inbox.len() as u64, 0))
                .collect(),
            subagents: Vec::new(),
            runs: Vec::new(),
            units_finished: state.finished.len() as u64,
            budget: Budget::default(),
            store_bytes: (memory + artifacts + messages) as u64,
            degraded: false,
        })
    }
}

impl Clock for InMemory {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }

    async fn sleep(&self, duration: Duration) -> Woke {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Woke::ShuttingDown;
        }
        self.advance(duration);
        Woke::Elapsed
    }
}

/// Withdraws an open question when its asker stops waiting, however it stops.
struct Withdraw<'a> {
    services: &'a InMemory,
    id: u64,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        let mut state = self.services.lock();
        if let Some(asked) = state.questions.get_mut(&self.id) {
            asked.ended.get_or_insert(Ended::Withdrawn);
        }
    }
}

/// Ready once the generation is past `seen`.
struct Changed<'a> {
    services: &'a InMemory,
    seen: u64,
}

impl Future for Changed<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.services.lock();
        if state.generation != self.seen {
            return Poll::Ready(());
        }
        if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            state.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl Humans for InMemory {
    async fn ask(
        &self,
        origin: Origin,
        text: &str,
        schema: &Value,
        timeout: Duration,
    ) -> Result<Reply, Error> {
        human::check_question(text)?;
        human::check_schema(schema)?;
        let now = self.now_ms();
        let timeout = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        let deadline = now.saturating_add(timeout);
        let id = {
            let mut state = self.lock();
            let id = state
                .questions
                .keys()
                .next_back()
                .map_or(1, |last| last + 1);
            let question = Question::new(id, origin, text, schema.clone(), now);
            let asked = Asked {
                question,
                ended: None,
            };
            state.questions.insert(id, asked);
            id
        };
        let _withdraw = Withdraw { services: self, id };
        loop {
            let seen = {
                let state = self.lock();
                if let Some(Ended::Answered(answer)) = &state.questions[&id].ended {
                    return Ok(Reply::new(id, Some(answer.clone())));
                }
                state.generation
            };
            if self.now_ms() >= deadline || self.shutting_down.load(Ordering::SeqCst) {
                return Ok(Reply::new(id, None));
            }
            Changed {
                services: self,
                seen,
            }
            .await;
        }
    }

    async fn open(&self) -> Result<Vec<Question>, Error> {
        let state = self.lock();
        let open = state.questions.values().filter(|a| a.ended.is_none());
        Ok(open.map(|a| a.question.clone()).collect())
    }

    async fn answer(&self, id: u64, answer: Value) -> Result<(), Error> {
        let not_found = || Error::NotFound {
            what: format!("open question {id}"),
        };
        let schema = {
            let state = self.lock();
            let asked = state.questions.get(&id).filter(|a| a.ended.is_none());
            asked.ok_or_else(not_found)?.question.schema.clone()
        };
        human::check_answer(&schema, &answer)?;
        {
            let mut state = self.lock();
            let asked = state.questions.get_mut(&id).filter(|a| a.ended.is_none());
            asked.ok_or_else(not_found)?.ended = Some(Ended::Answered(answer));
        }
        self.changed_now();
        Ok(())
    }
}

impl Instruction for InMemory {
    async fn current(&self) -> Result<Current, Error> {
        Ok(self.lock().instruction.clone())
    }

    async fn follow(&self, server: Option<&str>, uri: &str) -> Result<Current, Error> {
        let now_ms = self.now_ms();
        let mut state = self.lock();
        let followed = state.instruction.source.as_ref().map(|s| s.server.clone());
        let server = server
            .map(str::to_owned)
            .or(followed)
            .ok_or(Error::NotFound {
                what: "instruction server".to_owned(),
            })?;
        if !state.resources.keys().any(|(s, _)| *s == server) {
            return Err(Error::NotFound {
                what: format!("server {server:?}"),
            });
        }
        let key = (server.clone(), uri.to_owned());
        let text = state.resources.get(&key).cloned().ok_or(Error::Server {
            server: server.clone(),
            detail: format!("no resource {uri}"),
        })?;
        if text.len() > crate::instruction::TEXT_MAX {
            return Err(Error::TooLarge {
                what: "instruction",
                size: text.len(),
                max: crate::instruction::TEXT_MAX,
            });
        }
        state.instruction = Current {
            source: Some(Source::new(&server, uri)),
            text: Some(text),
            read_at_ms: Some(now_ms),
            subscribed: true,
        };
        Ok(state.instruction.clone())
    }
}

impl Skills for InMemory {
    async fn list(&self) -> Result<Vec<Skill>, Error> {
        Ok(self.lock().skills.iter().map(|(s, _)| s.clone()).collect())
    }

    async fn loaded(&self, unit: &str) -> Result<Vec<String>, Error> {
        let state = self.lock();
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
        let mut state = self.lock();
        let (skill, messages) = state
            .skills
            .iter()
            .find(|(s, _)| s.name == name)
            .cloned()
            .ok_or_else(|| Error::NotFound {
                what: format!("skill {name:?}"),
            })?;
        skill.check(&arguments)?;
        let said = messages.iter().map(|m| {
            let text = arguments.iter().fold(m.text.clone(), |text, (k, v)| {
                text.replace(&format!("{{{k}}}"), v)
            });
            Said::new(m.role, &text)
        });
        let loaded = Loaded::new(&skill, said.collect());
        state
            .loaded
            .entry(unit.to_owned())
            .or_default()
            .load(loaded.clone())?;
        Ok(loaded)
    }

    async fn unload(&self, unit: &str, name: &str) -> Result<bool, Error> {
        let mut state = self.lock();
        Ok(state
            .loaded
            .get_mut(unit)
            .is_some_and(|set| set.unload(name)))
    }
}

/// Subagent `id`, unless it is unknown or retired.
fn alive<'a>(state: &'a mut State, id: &str) -> Result<&'a mut Child, Error> {
    let unknown = || Error::UnknownSubagent {
        subagent: id.to_owned(),
    };
    let found = state.subagents.get_mut(id).ok_or_else(unknown)?;
    match found.status.state {
        Standing::Retired => Err(unknown()),
        _ => Ok(found),
    }
}

/// `now_ms` plus `deadline`, if any.
fn deadline_ms(now_ms: i64, deadline: Option<Duration>) -> Option<i64> {
    let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    deadline.map(|d| now_ms.saturating_add(millis(d)))
}

impl Subagents for InMemory {
    async fn run(&self, parent: &str, spec: Spec) -> Result<String, Error> {
        let now = self.now_ms();
        let mut state = self.lock();
        let children = state.subagents.values();
        let running = children.filter(|c| c.status.state == Standing::Running);
        let running = running.count();
        if running >= crate::subagent::RUNNING_MAX {
            return Err(crate::subagent::too_many(running));
        }
        let id = format!("s{}", state.subagents.len() + 1);
        let mut status = Subagent::new(&id, parent, Standing::Running, now);
        status.deadline_ms = deadline_ms(now, spec.deadline);
        let child = Child {
            status,
            said: vec![spec.goal],
            deadline: spec.deadline,
        };
        state.subagents.insert(id.clone(), child);
        Ok(id)
    }

    async fn send(&self, id: &str, _from: &str, text: &str) -> Result<Subagent, Error> {
        let now = self.now_ms();
        let mut state = self.lock();
        let child = alive(&mut state, id)?;
        child.said.push(text.to_owned());
        if child.status.state.settled() {
            child.status.state = Standing::Running;
            child.status.deadline_ms = deadline_ms(now, child.deadline);
        }
        Ok(child.status.clone())
    }

    async fn status(&self, id: &str) -> Result<Subagent, Error> {
        let state = self.lock();
        let found = state.subagents.get(id).map(|c| c.status.clone());
        found.ok_or_else(|| Error::UnknownSubagent {
            subagent: id.to_owned(),
        })
    }

    async fn list(&self, parent: Option<&str>) -> Result<Vec<Subagent>, Error> {
        let state = self.lock();
        let listed = state.subagents.values().map(|c| &c.status);
        Ok(listed
            .filter(|s| s.state != Standing::Retired)
            .filter(|s| parent.is_none_or(|p| s.parent == p))
            .cloned()
            .collect())
    }

    async fn kill(&self, id: &str) -> Result<Subagent, Error> {
        let killed = {
            let mut state = self.lock();
            let child = alive(&mut state, id)?;
            if child.status.state == Standing::Running {
                child.status.state = Standing::Killed;
            }
            child.status.clone()
        };
        self.changed_now();
        Ok(killed)
    }

    async fn retire(&self, id: &str) -> Result<Subagent, Error> {
        let mut state = self.lock();
        let child = alive(&mut state, id)?;
        if child.status.state == Standing::Running {
            return Err(Error::Running {
                subagent: id.to_owned(),
            });
        }
        child.status.state = Standing::Retired;
        Ok(child.status.clone())
    }
}
