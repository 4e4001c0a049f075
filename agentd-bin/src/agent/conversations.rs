//! The agent at work: its conversations, each taking one turn at a time.
//!
//! A message appended to a conversation's inbox (`message.send`, `agentd say`) is told by the
//! store ([`Store::delivered`]) and wakes the conversation's task, which starts a turn unless
//! one is running: the turn takes the oldest messages of the inbox no turn took yet, at most
//! [`INBOX_PAGE`], in their order, as the user's. Messages that arrive during a turn, or past
//! the page, wait for the next, which starts as soon as it ends. At start, each conversation
//! whose inbox holds messages no turn took starts a turn. `root` is the instance's own
//! conversation; any other is made by its first message. Every conversation's turns call
//! agentd's own tools as the root scope, in that conversation ([`Caller::root`]). A subagent's
//! conversation (`subagent:<id>`) is left to the subagent's own task, which reads it as a turn
//! here does ([`unread`], [`said`], [`context`]).
//!
//! Nothing of a conversation stays in memory between its turns: each turn reads its history
//! (with its summary) and how far its inbox was taken from the store, and drops them when it
//! ends. A conversation's task ends once its inbox holds nothing new (or nothing it may take:
//! the budget is spent); the next message, or a new budget, starts another. A turn that
//! cannot start (the store fails before it takes its messages) is told to whoever waits for
//! it, and tried again after a wait that doubles while it keeps failing ([`RESTART`]).
//!
//! The daemon hands the agent what its turns work with ([`Setup`]: the instance, the own
//! tools, the servers held with their listings, the turn's deadline, the token budget, the
//! instruction and the skills), again at each change; a turn works with the setup it started
//! with. The tools' names are made from the setup ([`Offer`]) and each collision is logged
//! once (`tool.name.collision`). A turn that fails is logged (`turn.failed`); every turn's
//! end is told to whoever waits for it ([`Agent::say`]).
//!
//! A turn starts only while the instance's conversations used fewer tokens than the budget
//! (checked before the inbox is read): past it, the messages wait, whoever waits for their
//! turn hears so, and `budget.spent` is logged once for each budget it is spent under.
//! Another budget, once published, wakes the conversations whose messages wait. A
//! subagent's turns count in the budget and stop with it ([`Agent::spent`]).
//!
//! Every task runs on the daemon's tracker and ends at its shutdown, or when the agent is
//! stopped (a reload that changes `[model]`): a turn under way is dropped there (its calls
//! cancelled, the history kept as far as it went).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use agentd_tools::{Caller, Scope};
use mcp_negotiate::Catalog;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::calls::OwnTools;
use super::calls::{Runner, cut};
use super::context::{Context, Summary};
use super::instruction::Instruction;
use super::meta::{Place, TurnIds};
use super::model::{Message, Model};
use super::names::{Collision, Offer};
use super::skills::Skills;
use super::turn::{Durable, SYSTEM, Turn, TurnError};
use super::workers::{Elicitors, Followed, Workers};
use crate::clock::{Backoff, random_bytes, wall_ms};
use crate::store::conversations::Conversation;
use crate::store::{self, Delivered, Store};
use crate::telemetry::catalogue::own;

/// The instance's own conversation.
pub(crate) const ROOT: &str = "root";

/// The most bytes of a message's text a turn takes from the inbox (the rest is cut, and
/// the text says so): its history keeps it whatever `store.max_value_bytes` lets in.
const USER_MAX: usize = 1024 * 1024;

/// The most inbox messages one turn takes, oldest first: those past it wait for the next.
const INBOX_PAGE: usize = 100;

/// The wait before a turn that could not start (its store failed) is tried again: 1 s,
/// doubling to 60 s while it keeps failing.
const RESTART: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

/// How many turns' ends wait for the slowest [`Agent::say`].
const ANSWERS: usize = 256;

/// What the agent's turns work with, as the daemon has it now.
#[derive(Debug, Clone)]
pub(crate) struct Setup {
    /// The instance's name.
    pub(crate) instance: String,
    /// agentd's own tools.
    pub(crate) own: Arc<dyn OwnTools>,
    /// The servers held and listed, by name.
    pub(crate) servers: BTreeMap<String, Held>,
    /// A turn's deadline.
    pub(crate) turn_timeout: Duration,
    /// The tokens the instance may use: once its conversations used them, no turn starts.
    pub(crate) budget_tokens: Option<u64>,
    /// The instruction: the system prompt of a turn, as it is when the turn starts.
    pub(crate) instruction: Instruction,
    /// The skills, whose messages a unit loaded are in its turns' context.
    pub(crate) skills: Skills,
}

impl Setup {
    /// A turn's system prompt: the instruction as it is now, or [`SYSTEM`] until there is
    /// one.
    pub(crate) fn system(&self) -> Message {
        self.instruction
            .system()
            .unwrap_or_else(|| Message::System {
                text: SYSTEM.to_owned(),
            })
    }
}

/// A server held, as the agent sees it.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    /// What its worker follows.
    pub(crate) followed: Followed,
    /// Its tools, as last listed by the supervisor.
    pub(crate) catalog: Arc<Catalog>,
}

/// A setup with the tools offered from it.
#[derive(Debug)]
struct Ready {
    setup: Setup,
    offer: Offer,
    collisions: Vec<Collision>,
}

impl Ready {
    /// `setup` and its offer; the collisions not in `before` are logged.
    fn new(setup: Setup, before: &[Collision]) -> Self {
        let own = setup.own.granted(Scope::Root).into_iter();
        let served = setup.servers.iter().flat_map(|(server, held)| {
            let tools = held.catalog.tools().iter();
            tools.map(move |t| (server.as_str(), t))
        });
        let served = served.filter(|(s, t)| !setup.own.withholds(Scope::Root, s, &t.name));
        let (offer, collisions) = Offer::new(own, served);
        for c in collisions.iter().filter(|c| !before.contains(c)) {
            let (server, tool) = (c.origin.server(), c.origin.tool());
            own::tool_name_collision(&setup.instance, server, tool, &c.wanted, &c.name);
        }
        Self {
            setup,
            offer,
            collisions,
        }
    }
}

/// A turn's end, told to whoever waits for it.
#[derive(Debug, Clone)]
struct Answer {
    conversation: String,
    /// The inbox messages it took: past `after`, up to `through`.
    after: u64,
    through: u64,
    /// The model's answer, or why there is none ([`SayError::NotStarted`],
    /// [`SayError::Failed`] or [`SayError::BudgetSpent`]).
    answer: Result<Option<String>, SayError>,
}

/// Why [`Agent::say`] has no answer.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub(crate) enum SayError {
    /// The message was refused (`message.send`'s error).
    Refused(agentd_tools::Error),
    /// `message.send` answered without the message's id (its answer): the turn that takes
    /// the message cannot be told apart.
    NoId(Value),
    /// No turn could start: the store failed before one took the message (it is tried again
    /// after a wait).
    NotStarted(Arc<store::Error>),
    /// The turn that took it failed.
    Failed(Arc<TurnError>),
    /// Too many turns ended meanwhile: its end was missed.
    Missed,
    /// The agent stopped: the daemon is shutting down, or a reload changed `[model]`.
    Stopped,
    /// The instance's token budget is spent: no turn starts (the message is kept).
    BudgetSpent {
        /// The tokens used.
        used: u64,
        /// The budget, `limits.budget_tokens`.
        limit: u64,
    },
}

impl SayError {
    /// The stable code word of the error.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::Refused(e) => e.code(),
            Self::NoId(_) => "internal",
            Self::NotStarted(_) | Self::Failed(_) => "turn_failed",
            Self::Missed => "missed",
            Self::Stopped => "stopped",
            Self::BudgetSpent { .. } => "budget_spent",
        }
    }
}

impl fmt::Display for SayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Refused(e) => e.fmt(f),
            Self::NoId(answer) => write!(f, "message.send answered without an id: {answer}"),
            Self::NotStarted(e) => write!(f, "no turn could start (it is tried again): {e}"),
            Self::Failed(e) => write!(f, "the turn failed: {e}"),
            Self::Missed => f.write_str("the turn's end was missed: too many turns ended at once"),
            Self::Stopped => f.write_str(
                "the agent stopped: the daemon is shutting down, or a reload changed [model]",
            ),
            Self::BudgetSpent { used, limit } => write!(
                f,
                "the token budget is spent ({used} of limits.budget_tokens = {limit} used): no \
                 turn starts; the message is kept for when the budget allows"
            ),
        }
    }
}

impl std::error::Error for SayError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Refused(e) => Some(e),
            Self::NotStarted(e) => Some(&**e),
            Self::Failed(e) => Some(&**e),
            Self::NoId(_) | Self::Missed | Self::Stopped | Self::BudgetSpent { .. } => None,
        }
    }
}

/// What the agent's tasks share.
#[derive(Debug)]
struct Shared {
    store: Store,
    ready: watch::Sender<Arc<Ready>>,
    workers: Workers,
    answers: broadcast::Sender<Answer>,
    /// The conversations whose task runs, each with whether it was woken since it last
    /// looked at its inbox.
    awake: Mutex<BTreeMap<String, bool>>,
    /// The budget `budget.spent` was last logged for: it is logged again once spent under
    /// another (a turn that read the budget before it changed does not log it again).
    spent_told: Mutex<Option<u64>>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

/// The running agent, as the daemon and the control socket hold it; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Agent {
    shared: Arc<Shared>,
}

impl Agent {
    /// Starts the agent over `model` and `store` with `setup`, its workers answering a
    /// server's elicitations with the elicitor `elicitors` makes for it, its tasks on `tasks`
    /// until `shutdown` (or [`Agent::stop`]).
    pub(crate) fn start<M: Model>(
        model: M,
        setup: Setup,
        store: Store,
        elicitors: Elicitors,
        tasks: &TaskTracker,
        shutdown: CancellationToken,
    ) -> Self {
        let workers = Workers::new(elicitors, tasks.clone());
        workers.follow(&followed(&setup));
        // Subscribed before the inboxes are read: nothing falls between.
        let delivered = store.delivered();
        let ready = watch::Sender::new(Arc::new(Ready::new(setup, &[])));
        let published = ready.subscribe();
        let shared = Arc::new(Shared {
            store,
            ready,
            workers,
            answers: broadcast::Sender::new(ANSWERS),
            awake: Mutex::default(),
            spent_told: Mutex::default(),
            shutdown,
            tasks: tasks.clone(),
        });
        let model = Arc::new(model);
        tasks.spawn(dispatch(shared.clone(), model, delivered, published));
        Self { shared }
    }

    /// What turns work with from now on (a turn under way keeps its own); the workers of
    /// servers no longer held as they were are let go. Another budget wakes the
    /// conversations whose messages wait, once it is published: their turns see it.
    pub(crate) fn set(&self, setup: Setup) {
        let before = self.shared.ready.borrow().collisions.clone();
        self.shared.workers.follow(&followed(&setup));
        self.shared
            .ready
            .send_replace(Arc::new(Ready::new(setup, &before)));
    }

    /// What turns work with now.
    pub(crate) fn setup(&self) -> Setup {
        self.shared.ready.borrow().setup.clone()
    }

    /// Why no turn may start under `setup` now: its budget is spent (logged once, as a
    /// conversation's turn would).
    pub(crate) async fn spent(&self, setup: &Setup) -> Result<Option<SayError>, store::Error> {
        self.shared.spent(setup).await
    }

    /// Lets every worker go (a reload, the drain): each is closed once its calls end.
    pub(crate) fn let_workers_go(&self) {
        self.shared.workers.clear();
    }

    /// Stops the agent: its tasks end, its turns under way are dropped (their history kept as
    /// far as it went), its workers are let go.
    pub(crate) fn stop(&self) {
        self.shared.shutdown.cancel();
        self.let_workers_go();
    }

    /// Sends `text` into `conversation` as the operator (`message.send`) and waits for the
    /// end of the turn that takes it: the model's answer.
    pub(crate) async fn say(
        &self,
        conversation: &str,
        text: &str,
    ) -> Result<Option<String>, SayError> {
        let shared = &self.shared;
        // Subscribed before the message is sent: its turn's end cannot pass unseen.
        let mut answers = shared.answers.subscribe();
        let own = shared.ready.borrow().setup.own.clone();
        let caller = Caller::operator(Scope::Root);
        let arguments = json!({"conversation": conversation, "text": text});
        let sent = own.call(&caller, "message.send", arguments);
        let sent = sent.await.map_err(SayError::Refused)?;
        let id = message_id(&sent)?;
        loop {
            // An answer first: a turn that ended as the agent stopped is told as it ended.
            let answer = tokio::select! {
                biased;
                answer = answers.recv() => answer,
                () = shared.shutdown.cancelled() => return Err(SayError::Stopped),
            };
            match answer {
                Ok(a) if a.conversation == conversation && a.after < id && id <= a.through => {
                    return a.answer;
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => return Err(SayError::Missed),
                Err(RecvError::Closed) => return Err(SayError::Stopped),
            }
        }
    }
}

/// The id of the message `message.send` answered `sent` for.
fn message_id(sent: &Value) -> Result<u64, SayError> {
    let id = sent.get("id").and_then(Value::as_u64);
    id.ok_or_else(|| SayError::NoId(sent.clone()))
}

/// What the workers of `setup`'s servers follow.
fn followed(setup: &Setup) -> BTreeMap<String, Followed> {
    let servers = setup.servers.iter();
    servers
        .map(|(n, h)| (n.clone(), h.followed.clone()))
        .collect()
}

/// Wakes each conversation with messages to take: those waiting at start (or after a lag,
/// or once a setup with another budget is `published`), then each told delivered; a
/// conversation's task is started at a wake when it has none.
async fn dispatch<M: Model>(
    shared: Arc<Shared>,
    model: Arc<M>,
    mut delivered: broadcast::Receiver<Delivered>,
    mut published: watch::Receiver<Arc<Ready>>,
) {
    let wake = |conversation: String| {
        // A subagent's conversation is run by the subagent's own task.
        if agentd_tools::subagent::of_conversation(&conversation).is_some() {
            return;
        }
        if shared.woken(&conversation) {
            let task = converse(shared.clone(), model.clone(), conversation);
            shared.tasks.spawn(task);
        }
    };
    let mut budget = published.borrow_and_update().setup.budget_tokens;
    let mut scan = true;
    loop {
        if std::mem::take(&mut scan) {
            match shared.store.conversations_waiting().await {
                Ok(waiting) => waiting.into_iter().for_each(wake),
                // Looked at again after the next delivery.
                Err(_) => scan = true,
            }
        }
        // Stop first: once the agent is stopped, no delivery ready with it wakes a turn.
        let woke = tokio::select! {
            biased;
            () = shared.shutdown.cancelled() => return,
            told = delivered.recv() => match told {
                Ok(told) => Wake::Delivered(told.conversation),
                Err(RecvError::Lagged(_)) => Wake::Lagged,
                Err(RecvError::Closed) => return,
            },
            // The sender is the agent's own: it outlives the dispatch.
            Ok(()) = published.changed() => {
                Wake::Published(published.borrow_and_update().setup.budget_tokens)
            }
        };
        match woke {
            Wake::Delivered(conversation) => wake(conversation),
            Wake::Lagged => scan = true,
            Wake::Published(now) if now != budget => {
                budget = now;
                scan = true;
            }
            Wake::Published(_) => {}
        }
    }
}

/// What wakes the dispatch.
#[derive(Debug)]
enum Wake {
    /// A message was delivered into this conversation's inbox.
    Delivered(String),
    /// Deliveries were missed: every inbox is looked at.
    Lagged,
    /// A setup was published, with this budget: every inbox is looked at when the budget
    /// is another.
    Published(Option<u64>),
}

/// A conversation's task: turns until its inbox holds nothing new, then it ends (the next
/// message starts another). A turn that cannot start is tried again after [`RESTART`]'s wait,
/// which doubles while it keeps failing.
async fn converse<M: Model>(shared: Arc<Shared>, model: Arc<M>, conversation: String) {
    let mut restart = RESTART;
    loop {
        // Stop first: a stopped agent starts no turn, and a turn under way is dropped at once.
        let next = tokio::select! {
            biased;
            () = shared.shutdown.cancelled() => return,
            next = shared.turn(&*model, &conversation) => next,
        };
        match next {
            Ok(true) => restart.reset(),
            Ok(false) if shared.idle(&conversation) => return,
            Ok(false) => restart.reset(),
            // No turn could start, and no message was taken: whoever waits for one hears why,
            // and the inbox is looked at again after the wait.
            Err(e) => {
                let _ = shared.answers.send(Answer {
                    conversation: conversation.clone(),
                    after: 0,
                    through: u64::MAX,
                    answer: Err(SayError::NotStarted(Arc::new(e))),
                });
                let wait = restart.fail();
                tokio::select! {
                    biased;
                    () = shared.shutdown.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

impl Shared {
    /// Whether `conversation`'s task is to be started: it has none. One it has looks at its
    /// inbox again before it ends.
    fn woken(&self, conversation: &str) -> bool {
        let mut awake = self.awake();
        match awake.get_mut(conversation) {
            Some(woken) => {
                *woken = true;
                false
            }
            None => {
                awake.insert(conversation.to_owned(), false);
                true
            }
        }
    }

    /// Whether `conversation`'s task, having found nothing to take, ends: unless it was woken
    /// since it looked (then it looks again). Once it ends, the next wake starts another.
    fn idle(&self, conversation: &str) -> bool {
        let mut awake = self.awake();
        match awake.get_mut(conversation) {
            Some(woken) if *woken => {
                *woken = false;
                false
            }
            _ => {
                awake.remove(conversation);
                true
            }
        }
    }

    fn awake(&self) -> MutexGuard<'_, BTreeMap<String, bool>> {
        // A panic under the lock leaves a map that is still whole.
        self.awake.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn spent_told(&self) -> MutexGuard<'_, Option<u64>> {
        self.spent_told
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the budget of `setup` is spent: the instance's conversations used as many
    /// tokens as it allows, or more. `budget.spent` is logged the first time, and again the
    /// first time it is spent under another budget.
    async fn spent(&self, setup: &Setup) -> Result<Option<SayError>, store::Error> {
        let Some(limit) = setup.budget_tokens else {
            return Ok(None);
        };
        let budget = self.store.budget(Some(limit)).await?;
        if !budget.spent() {
            return Ok(None);
        }
        let used = budget.used;
        if self.spent_told().replace(limit) != Some(limit) {
            own::budget_spent(&setup.instance, used, limit);
        }
        Ok(Some(SayError::BudgetSpent { used, limit }))
    }

    /// Runs one turn of `conversation` over the first messages of its inbox no turn took
    /// (at most [`INBOX_PAGE`]), its context read from the store for it: whether it ran. A
    /// turn that fails is logged and told; a store that fails before the turn starts is the
    /// error, and no message is taken. While the budget is spent, the inbox is not read:
    /// whoever waits for a turn of `conversation` hears so.
    async fn turn<M: Model>(&self, model: &M, conversation: &str) -> Result<bool, store::Error> {
        let ready = self.ready.borrow().clone();
        let setup = &ready.setup;
        if let Some(spent) = self.spent(setup).await? {
            let _ = self.answers.send(Answer {
                conversation: conversation.to_owned(),
                after: 0,
                through: u64::MAX,
                answer: Err(spent),
            });
            return Ok(false);
        }
        let (kept, taken) = unread(&self.store, conversation).await?;
        let after = kept.as_ref().map_or(0, |c| c.taken);
        let Some(through) = taken.last().map(|m| m.id) else {
            return Ok(false);
        };
        let said = said(taken);
        let mut context = context(&self.store, conversation, kept.as_ref()).await?;
        let number = self
            .store
            .turn_start(conversation, through, &said, wall_ms())
            .await?;
        context.history.extend(said);
        let caller = Caller::root(conversation);
        let place = Place {
            instance: &setup.instance,
            conversation,
            turn: number,
        };
        let turn = Turn {
            model,
            runner: Runner {
                own: &*setup.own,
                workers: &self.workers,
                caller: &caller,
                deadline: Instant::now() + setup.turn_timeout,
            },
            offer: &ready.offer,
            history: &Durable {
                store: &self.store,
                conversation,
                turn: number,
            },
            system: setup.system(),
            skills: &setup.skills,
            place,
            ids: TurnIds::new(random_bytes(), random_bytes()),
            spans: random_bytes::<8>,
        };
        let ended = turn.run(&mut context).await;
        if let Err(e) = &ended {
            own::turn_failed(&setup.instance, conversation, number, &e.to_string());
        }
        let _ = self.answers.send(Answer {
            conversation: conversation.to_owned(),
            after,
            through,
            answer: ended
                .map(|e| e.text)
                .map_err(|e| SayError::Failed(Arc::new(e))),
        });
        Ok(true)
    }
}

/// What a turn of `conversation` takes: its row (none before its first turn), and the oldest
/// messages of its inbox no turn took, at most [`INBOX_PAGE`].
pub(crate) async fn unread(
    store: &Store,
    conversation: &str,
) -> Result<(Option<Conversation>, Vec<store::inbox::Message>), store::Error> {
    let kept = store.conversation(conversation).await?;
    let after = kept.as_ref().map_or(0, |c| c.taken);
    let taken = store.messages(conversation, after, INBOX_PAGE).await?;
    Ok((kept, taken))
}

/// The user messages a turn takes from `taken`, each cut at [`USER_MAX`].
pub(crate) fn said(taken: Vec<store::inbox::Message>) -> Vec<Message> {
    let user = |m: store::inbox::Message| Message::User {
        text: cut(m.text, USER_MAX),
    };
    taken.into_iter().map(user).collect()
}

/// `conversation`'s history and its summary, as the store keeps them (`kept`: the
/// conversation's row, none before its first turn).
pub(crate) async fn context(
    store: &Store,
    conversation: &str,
    kept: Option<&Conversation>,
) -> Result<Context, store::Error> {
    let mut history = Vec::new();
    let mut after = 0;
    loop {
        let page = store.conversation_history::<Message>(
            conversation,
            after,
            store::conversations::PAGE_MAX,
        );
        let page = page.await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        history.extend(page.into_iter().map(|e| e.message));
    }
    let summary = kept.and_then(|c| {
        let text = c.summary.clone()?;
        Some(Summary::new(usize::try_from(c.summarized).ok()?, text))
    });
    Ok(Context { history, summary })
}

#[cfg(test)]
mod tests;
