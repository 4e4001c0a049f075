//! `sleep` and `await`: waiting for a duration, or until a condition holds. Time and
//! waiting go through [`Clock`], so that tests run in virtual time.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::Error;
use crate::memory::{Memory, check_key};
use crate::message::{Messages, check_conversation};
use crate::schema::parse;
use crate::subagent::Subagents;
use crate::workflow::Workflows;

/// `await`'s timeout when the call says nothing (60 s).
pub const AWAIT_DEFAULT: Duration = Duration::from_secs(60);
/// How long [`Clock::changed`] waits at most by default between two checks of a condition.
pub const POLL: Duration = Duration::from_millis(250);

/// Why a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Woke {
    /// Its time passed, or something may have changed.
    Elapsed,
    /// The daemon is shutting down.
    ShuttingDown,
}

/// The time, and waiting.
pub trait Clock: Send + Sync {
    /// Now, in Unix milliseconds.
    fn now_ms(&self) -> i64;

    /// Waits `duration`, or until shutdown.
    fn sleep(&self, duration: Duration) -> impl Future<Output = Woke> + Send;

    /// Waits until what `await` watches may have changed, at most `within`, or until
    /// shutdown. By default, a [`sleep`](Self::sleep) of `within`, at most [`POLL`].
    fn changed(&self, within: Duration) -> impl Future<Output = Woke> + Send {
        self.sleep(within.min(POLL))
    }
}

/// A record of a stream.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Record {
    /// Its sequence number in its stream.
    pub seq: u64,
    /// Its data.
    pub data: Value,
}

impl Record {
    /// Record `seq` holding `data`.
    pub fn new(seq: u64, data: Value) -> Self {
        Self { seq, data }
    }
}

/// The instance's streams, as `await` reads them.
pub trait Streams: Send + Sync {
    /// The first record of stream `name` past `after`, if any (none when the stream is not
    /// there).
    fn after(
        &self,
        name: &str,
        after: u64,
    ) -> impl Future<Output = Result<Option<Record>, Error>> + Send;
}

pub use crate::schema::read_duration as duration;

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Sleep {
    duration: Value,
}

/// Runs `sleep`.
pub(crate) async fn sleep(clock: &impl Clock, arguments: Value) -> Result<Value, Error> {
    let Sleep { duration: d } = parse("sleep", arguments)?;
    let d = duration("sleep", "/duration", &d)?;
    let start = clock.now_ms();
    let woke = clock.sleep(d).await;
    let slept = clock.now_ms().saturating_sub(start).max(0);
    Ok(json!({"slept_ms": slept, "cancelled": woke == Woke::ShuttingDown}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Await {
    until: Until,
    timeout: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Until {
    Memory {
        key: String,
        equals: Option<Value>,
    },
    Message {
        conversation: String,
        #[serde(default)]
        after: u64,
    },
    Stream {
        name: String,
        #[serde(default)]
        after: u64,
    },
    Run(String),
    Subagent(String),
}

/// What `await` watches.
type Sources<'a, M, G, S, A, W> = (&'a M, &'a G, &'a S, &'a A, &'a W);

/// Runs `await`: checks the condition, then again each time the clock says something may
/// have changed, until it holds or the timeout passes. A subagent holds once it settled, a
/// workflow run once it ended.
pub(crate) async fn wait(
    clock: &impl Clock,
    sources: Sources<'_, impl Memory, impl Messages, impl Streams, impl Subagents, impl Workflows>,
    arguments: Value,
) -> Result<Value, Error> {
    let tool = "await";
    let args: Await = parse(tool, arguments)?;
    let timeout = match &args.timeout {
        Some(t) => duration(tool, "/timeout", t)?,
        None => AWAIT_DEFAULT,
    };
    match &args.until {
        Until::Memory { key, .. } => check_key(key)?,
        Until::Message { conversation, .. } => {
            check_conversation(tool, "/until/message/conversation", conversation)?;
        }
        Until::Stream { .. } | Until::Subagent(_) | Until::Run(_) => {}
    }
    let met = until(clock, timeout, || met(sources, &args.until)).await?;
    Ok(met.unwrap_or_else(|| json!({"met": false})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AwaitSubagent {
    id: String,
    timeout: Option<Value>,
}

/// Runs `subagent.await`: the subagent's status once it settled, or once the timeout passed.
pub(crate) async fn subagent(
    clock: &impl Clock,
    subagents: &impl Subagents,
    arguments: Value,
) -> Result<Value, Error> {
    let tool = "subagent.await";
    let args: AwaitSubagent = parse(tool, arguments)?;
    let timeout = match &args.timeout {
        Some(t) => duration(tool, "/timeout", t)?,
        None => AWAIT_DEFAULT,
    };
    let settled = until(clock, timeout, || async {
        let status = subagents.status(&args.id).await?;
        Ok(status.state.settled().then_some(status))
    });
    let status = match settled.await? {
        Some(status) => status,
        None => subagents.status(&args.id).await?,
    };
    Ok(status.to_value())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AwaitRun {
    run: String,
    timeout: Option<Value>,
}

/// Runs `workflow.wait`: the run once it ended, or as it is once the timeout passed.
pub(crate) async fn run(
    clock: &impl Clock,
    workflows: &impl Workflows,
    arguments: Value,
) -> Result<Value, Error> {
    let tool = "workflow.wait";
    let args: AwaitRun = parse(tool, arguments)?;
    let timeout = match &args.timeout {
        Some(t) => duration(tool, "/timeout", t)?,
        None => AWAIT_DEFAULT,
    };
    let ended = until(clock, timeout, || async {
        let record = workflows.status(&args.run).await?;
        Ok(record.status.settled().then_some(record))
    });
    let record = match ended.await? {
        Some(record) => record,
        None => workflows.status(&args.run).await?,
    };
    Ok(record.to_value())
}

/// What `check` holds with: checked now, then again each time `clock` says something may
/// have changed; `None` once `timeout` passed first.
async fn until<T, F>(
    clock: &impl Clock,
    timeout: Duration,
    mut check: impl FnMut() -> F,
) -> Result<Option<T>, Error>
where
    F: Future<Output = Result<Option<T>, Error>>,
{
    let deadline = clock.now_ms().saturating_add(millis(timeout));
    loop {
        if let Some(held) = check().await? {
            return Ok(Some(held));
        }
        let left = deadline.saturating_sub(clock.now_ms());
        if left <= 0 {
            return Ok(None);
        }
        let left = Duration::from_millis(u64::try_from(left).unwrap_or(0));
        if clock.changed(left).await == Woke::ShuttingDown {
            return Err(Error::ShuttingDown);
        }
    }
}

/// The answer when `until` holds.
async fn met(
    (memory, messages, streams, subagents, workflows): Sources<
        '_,
        impl Memory,
        impl Messages,
        impl Streams,
        impl Subagents,
        impl Workflows,
    >,
    until: &Until,
) -> Result<Option<Value>, Error> {
    Ok(match until {
        Until::Memory { key, equals } => memory
            .get(key)
            .await?
            .filter(|v| equals.as_ref().is_none_or(|e| *e == v.value))
            .map(|v| {
                json!({"met": true, "memory": {"key": key, "value": v.value, "version": v.version}})
            }),
        Until::Message {
            conversation,
            after,
        } => messages
            .after(conversation, *after)
            .await?
            .map(|m| {
                json!({"met": true, "message": {
                    "conversation": conversation, "id": m.id, "from": m.from,
                    "text": m.text, "at_ms": m.at_ms,
                }})
            }),
        Until::Stream { name, after } => streams
            .after(name, *after)
            .await?
            .map(|r| json!({"met": true, "stream": {"name": name, "seq": r.seq, "data": r.data}})),
        Until::Subagent(id) => {
            let status = subagents.status(id).await?;
            let settled = status.state.settled();
            settled.then(|| json!({"met": true, "subagent": status.to_value()}))
        }
        Until::Run(run) => {
            let record = workflows.status(run).await?;
            let ended = record.status.settled();
            ended.then(|| json!({"met": true, "run": record.summary()}))
        }
    })
}
