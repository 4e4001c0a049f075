//! A subagent's task: while it runs, turns of its conversation until its inbox holds
//! nothing new, then it settles.
//!
//! Woken by a run, a message or a kill. A run reads the subagent from the store (a subagent
//! that does not run any more is left as it is), opens its session when it has none
//! ([`Session::open`]), and takes one turn after another, each over the oldest messages no turn
//! took (its first turn's context starting with the note of its servers' resources), at
//! each turn boundary first listing again the tools that changed ([`Session::boundary`]).
//! Each turn is bounded by the turn deadline and by what is left of the run's: once that
//! passed, the subagent has timed out. Its turns are shown what a conversation's are (the
//! instruction as the system prompt, its unit's skills, its summary) and their tokens are
//! its conversation's; one starts only while the instance's budget is not spent
//! ([`Agent::spent`]), else the subagent fails saying so. It settles `finished` (its last
//! answer), `failed` (why), or `timed_out`; a settle that finds a message no turn took runs
//! it on.
//!
//! A kill cancels the run's token: the turn under way is dropped (its calls cancelled on the
//! wire) and the session with it (its connections closed once their calls end). A settled
//! subagent keeps its session for [`SESSION_IDLE`], then closes it. The task ends when the
//! subagent is retired, or when the agent stops.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use agentd_tools::Caller;
use agentd_tools::subagent::{State, conversation};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::session::Session;
use crate::agent::calls::Runner;
use crate::agent::conversations::{Agent, Setup, context, said, unread};
use crate::agent::meta::{Place, TurnIds};
use crate::agent::model::{Message, Model};
use crate::agent::turn::{Durable, Turn, TurnError};
use crate::agent::workers::Elicitors;
use crate::clock::{random_bytes, wall_ms};
use crate::store::Store;
use crate::store::subagents::Settled;
use crate::telemetry::catalogue::own;

/// The agent the subagents run in: its model, what its turns work with, where tasks run and
/// when they end.
pub(crate) struct Host<M> {
    /// The model.
    pub(crate) model: M,
    /// The agent: what its turns work with now.
    pub(crate) agent: Agent,
    /// Who answers a server's elicitations on a subagent's connection.
    pub(crate) elicitors: Elicitors,
    /// Where the subagents' tasks run, and their connections close.
    pub(crate) tasks: TaskTracker,
    /// Cancelled when the agent stops.
    pub(crate) stop: CancellationToken,
    /// How long a settled subagent keeps its session for a message that would run it on
    /// ([`SESSION_IDLE`]).
    pub(crate) session_idle: Duration,
}

/// How long a settled subagent keeps its connections open: a message within it runs on the
/// same session (and its servers' changed tools are listed again at the turn boundary);
/// after it, the connections close and a message opens a session afresh.
pub(crate) const SESSION_IDLE: Duration = Duration::from_secs(300);

impl<M> std::fmt::Debug for Host<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").finish_non_exhaustive()
    }
}

/// The agent the subagents run in, whatever its model.
pub(crate) trait Runs: Send + Sync + std::fmt::Debug {
    /// What its turns work with now.
    fn setup(&self) -> Setup;

    /// Starts subagent `id`'s task, over `store`, sharing `child` with the tools.
    fn start(self: Arc<Self>, store: Store, id: String, child: Arc<Child>);
}

impl<M: Model> Runs for Host<M> {
    fn setup(&self) -> Setup {
        self.agent.setup()
    }

    fn start(self: Arc<Self>, store: Store, id: String, child: Arc<Child>) {
        let tasks = self.tasks.clone();
        tasks.spawn(live(self, store, id, child));
    }
}

/// What a subagent's task and the tools share.
#[derive(Debug, Default)]
pub(crate) struct Child {
    wake: Notify,
    /// The current run's: cancelled by a kill.
    run: Mutex<CancellationToken>,
    /// Its servers that said their tools changed, since its last turn boundary.
    changed: Mutex<BTreeSet<String>>,
    /// Cancelled when it is retired.
    end: CancellationToken,
}

impl Child {
    fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
        mutex.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Something may be due: a run, a message.
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// It runs again: a run's token afresh, if the last was killed.
    pub(crate) fn renew(&self) {
        let mut run = Self::lock(&self.run);
        if run.is_cancelled() {
            *run = CancellationToken::new();
        }
    }

    /// Killed: its turn under way is dropped, its session closed.
    pub(crate) fn kill(&self) {
        Self::lock(&self.run).cancel();
        self.wake();
    }

    /// Retired: its task ends.
    pub(crate) fn end(&self) {
        self.end.cancel();
    }

    /// `server` said its tools changed.
    pub(crate) fn changed(&self, server: &str) {
        Self::lock(&self.changed).insert(server.to_owned());
    }

    fn take_changed(&self) -> BTreeSet<String> {
        std::mem::take(&mut Self::lock(&self.changed))
    }
}

/// What a subagent's task holds between runs: its session. Nothing of its conversation
/// stays in memory between turns (each reads it from the store, as a conversation's does).
#[derive(Debug, Default)]
struct Held {
    session: Option<Session>,
}

/// Subagent `id`'s task, in `host`, over `store`.
async fn live<M: Model>(host: Arc<Host<M>>, store: Store, id: String, child: Arc<Child>) {
    let mut held = Held::default();
    // Settled, with its session open: the session closes once idle for `session_idle`.
    let mut settled = false;
    loop {
        let idle = settled && held.session.is_some();
        tokio::select! {
            () = child.wake.notified() => {}
            () = tokio::time::sleep(host.session_idle), if idle => {
                held = Held::default();
                continue;
            }
            () = child.end.cancelled() => return,
            () = host.stop.cancelled() => return,
        }
        settled = false;
        let run = Child::lock(&child.run).clone();
        let ran = tokio::select! {
            ran = turns(&host, &store, &id, &child, &mut held), if !run.is_cancelled() => ran,
            () = run.cancelled() => None,
            () = child.end.cancelled() => return,
            () = host.stop.cancelled() => return,
        };
        if run.is_cancelled() {
            // Killed: the kill was written; its connections go.
            held = Held::default();
            continue;
        }
        let Some(outcome) = ran else { continue };
        match store.subagent_settle(&id, outcome).await {
            // Not settled: a message came meanwhile and its turn is due, or a kill came.
            Ok(false) => child.wake(),
            _ => settled = true,
        }
    }
}

fn failed(error: String) -> Settled {
    Settled {
        state: State::Failed,
        answer: None,
        error: Some(error),
    }
}

/// Takes turns of subagent `id` while its inbox holds messages no turn took: how it settles,
/// or `None` when it does not run.
async fn turns<M: Model>(
    host: &Host<M>,
    store: &Store,
    id: &str,
    child: &Child,
    held: &mut Held,
) -> Option<Settled> {
    let record = match store.subagent(id).await {
        Ok(record) if record.status.state == State::Running => record,
        Ok(_) => return None,
        Err(e) => return Some(failed(e.to_string())),
    };
    let deadline_ms = record.status.deadline_ms.unwrap_or(i64::MAX);
    let talk = conversation(id);
    let mut answer = None;
    loop {
        let setup = host.agent.setup();
        let left = u64::try_from(deadline_ms.saturating_sub(wall_ms())).unwrap_or(0);
        if left == 0 {
            return Some(timed_out());
        }
        // Whether the run's deadline comes before the turn's.
        let last = Duration::from_millis(left) <= setup.turn_timeout;
        let bound = Instant::now() + setup.turn_timeout.min(Duration::from_millis(left));
        let (kept, taken) = match unread(store, &talk).await {
            Ok(unread) => unread,
            Err(e) => return Some(failed(e.to_string())),
        };
        let Some(through) = taken.last().map(|m| m.id) else {
            return Some(Settled {
                state: State::Finished,
                answer,
                error: None,
            });
        };
        match host.agent.spent(&setup).await {
            Ok(None) => {}
            Ok(Some(spent)) => return Some(failed(spent.to_string())),
            Err(e) => return Some(failed(e.to_string())),
        }
        let session = match &mut held.session {
            Some(session) => {
                session.boundary(&setup, child.take_changed(), bound).await;
                session
            }
            None => {
                child.take_changed();
                let reach = (host.elicitors.clone(), host.tasks.clone());
                let servers = record.spec.servers.as_deref();
                let mut spec = agentd_tools::subagent::Spec::new("");
                spec.tools.clone_from(&record.spec.tools);
                let opened = Session::open(&setup, servers, spec.narrowing(), reach, bound);
                match opened.await {
                    Ok(session) => held.session.insert(session),
                    Err(e) => return Some(failed(e)),
                }
            }
        };
        let mut context = match context(store, &talk, kept.as_ref()).await {
            Ok(context) => context,
            Err(e) => return Some(failed(e.to_string())),
        };
        let mut said = said(taken);
        if context.history.is_empty()
            && let Some(note) = session.note()
        {
            said.insert(0, Message::System { text: note.into() });
        }
        let number = match store.turn_start(&talk, through, &said, wall_ms()).await {
            Ok(number) => number,
            Err(e) => return Some(failed(e.to_string())),
        };
        context.history.extend(said);
        let caller = Caller::subagent(id);
        let session: &Session = session;
        let turn = Turn {
            model: &host.model,
            runner: Runner {
                own: session,
                workers: session.workers(),
                caller: &caller,
                deadline: bound,
            },
            offer: session.offer(),
            history: &Durable {
                store,
                conversation: &talk,
                turn: number,
            },
            system: setup.system(),
            skills: &setup.skills,
            place: Place {
                instance: &setup.instance,
                conversation: &talk,
                turn: number,
            },
            ids: TurnIds::new(random_bytes(), random_bytes()),
            spans: random_bytes::<8>,
        };
        let ended = turn.run(&mut context).await;
        if let Err(e) = &ended {
            own::turn_failed(&setup.instance, &talk, number, &e.to_string());
        }
        match ended {
            Ok(ended) => answer = ended.text.or(answer),
            Err(TurnError::Deadline) if last => return Some(timed_out()),
            Err(e) => return Some(failed(e.to_string())),
        }
    }
}

fn timed_out() -> Settled {
    Settled {
        state: State::TimedOut,
        answer: None,
        error: Some("its deadline passed".to_owned()),
    }
}
