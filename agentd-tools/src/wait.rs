//! `sleep` and `await`: waiting for a duration, or until a condition holds. Time and
//! waiting go through [`Clock`], so that tests run in virtual time.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::Error;
use crate::memory::{Memory, check_key};
use crate::message::{Messages, check_conversation};
use crate::schema::DURATION_MAX_MS;
use crate::schema::parse;

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

/// A duration argument: a humantime string (`"5s"`) or milliseconds; 1 ms ..= 1 h.
pub fn duration(tool: &str, pointer: &str, value: &Value) -> Result<Duration, Error> {
    let range = || Error::invalid(tool, pointer, "range", "a duration is 1 ms to 1 h");
    let d = match value {
        Value::String(text) => humantime::parse_duration(text)
            .map_err(|e| Error::invalid(tool, pointer, "duration", e.to_string()))?,
        Value::Number(n) => Duration::from_millis(n.as_u64().ok_or_else(range)?),
        _ => {
            return Err(Error::invalid(
                tool,
                pointer,
                "type",
                "a string or an integer",
            ));
        }
    };
    if d < Duration::from_millis(1) || d > Duration::from_millis(DURATION_MAX_MS) {
        return Err(range());
    }
    Ok(d)
}

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

/// Runs `await`: checks the condition, then again each time the clock says something may
/// have changed, until it holds or the timeout passes.
pub(crate) async fn wait(
    clock: &impl Clock,
    sources: (&impl Memory, &impl Messages, &impl Streams),
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
        // No runs or subagents exist yet.
        Until::Run(run) => return Err(Error::UnknownRun { run: run.clone() }),
        Until::Subagent(id) => {
            return Err(Error::UnknownSubagent {
                subagent: id.clone(),
            });
        }
        Until::Stream { .. } => {}
    }
    let deadline = clock.now_ms().saturating_add(millis(timeout));
    loop {
        if let Some(met) = met(sources, &args.until).await? {
            return Ok(met);
        }
        let left = deadline.saturating_sub(clock.now_ms());
        if left <= 0 {
            return Ok(json!({"met": false}));
        }
        let left = Duration::from_millis(u64::try_from(left).unwrap_or(0));
        if clock.changed(left).await == Woke::ShuttingDown {
            return Err(Error::ShuttingDown);
        }
    }
}

/// The answer when `until` holds.
async fn met(
    (memory, messages, streams): (&impl Memory, &impl Messages, &impl Streams),
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
        Until::Run(_) | Until::Subagent(_) => None,
    })
}
