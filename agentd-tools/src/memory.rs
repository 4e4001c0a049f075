//! `memory.*`: durable memory shared by every unit of the instance, with queue operations.
//!
//! A key is 1..=256 bytes of UTF-8 without control characters ([`check_key`]); a value any
//! JSON whose compact serialization fits the service's [`Memory::max_value_bytes`]
//! ([`check_value`]). A key's first write makes version 1 and every change adds 1.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::Error;
use crate::schema::parse;

/// A key's largest size, in bytes.
pub const KEY_MAX: usize = 256;
/// `store.max_value_bytes` when configuration says nothing.
pub const VALUE_MAX_DEFAULT: usize = 262_144;
/// The smallest `store.max_value_bytes` configuration may set.
pub const VALUE_MAX_LEAST: usize = 1024;
/// The largest page of `memory.list`.
pub const LIST_MAX: usize = 100;
/// The page of `memory.list` when the call says nothing.
pub const LIST_DEFAULT: usize = 50;

/// A value and its version.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Versioned {
    /// The value.
    pub value: Value,
    /// Its version (1 after the key's first write).
    pub version: u64,
}

impl Versioned {
    /// `value` at `version`.
    pub fn new(value: Value, version: u64) -> Self {
        Self { value, version }
    }
}

/// A key in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Entry {
    /// The key.
    pub key: String,
    /// Its version.
    pub version: u64,
    /// Its value's compact serialization, in bytes.
    pub bytes: usize,
}

impl Entry {
    /// `key` at `version`, of `bytes`.
    pub fn new(key: String, version: u64, bytes: usize) -> Self {
        Self {
            key,
            version,
            bytes,
        }
    }
}

/// One page of a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Page {
    /// The keys, in byte order.
    pub keys: Vec<Entry>,
    /// Whether more keys follow the last one.
    pub more: bool,
}

impl Page {
    /// A page of `keys`, with `more` after them or not.
    pub fn new(keys: Vec<Entry>, more: bool) -> Self {
        Self { keys, more }
    }
}

/// Which end of an array `memory.shift` (first) and `memory.pop` (last) take from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The first item.
    First,
    /// The last item.
    Last,
}

/// What a shift or a pop took.
#[derive(Debug, Clone, PartialEq)]
pub enum Taken {
    /// An item; the key is now at `version`.
    Item(Versioned),
    /// Nothing: the array is empty or the key absent (version 0), at `version`.
    Empty {
        /// The key's version (unchanged).
        version: u64,
    },
}

/// The durable memory the `memory.*` tools act on. Every call is atomic: two concurrent
/// [`take`](Self::take)s never take the same item. Keys reach the service checked
/// ([`check_key`]); [`set`](Self::set) values checked against
/// [`max_value_bytes`](Self::max_value_bytes) too; [`push`](Self::push) checks that the
/// array after it fits. [`testing::check_memory`](crate::testing::check_memory) states the
/// semantics.
pub trait Memory: Send + Sync {
    /// The largest value, serialized compactly (`store.max_value_bytes`).
    fn max_value_bytes(&self) -> usize;

    /// The value at `key`, if any.
    fn get(&self, key: &str) -> impl Future<Output = Result<Option<Versioned>, Error>> + Send;

    /// Sets `key` to `value`; with `expected_version`, only when the key's version is that
    /// (0: absent), else [`Error::VersionMismatch`] and nothing changed. The new version.
    fn set(
        &self,
        key: &str,
        value: Value,
        expected_version: Option<u64>,
    ) -> impl Future<Output = Result<u64, Error>> + Send;

    /// Up to `limit` keys starting with `prefix`, strictly after `after`, in byte order.
    fn list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<Page, Error>> + Send;

    /// Appends `value` to the array at `key` (absent: `[value]`); a value that is not an
    /// array is [`Error::NotAnArray`], an array past the bound [`Error::TooLarge`]. The
    /// length and the new version.
    fn push(
        &self,
        key: &str,
        value: Value,
    ) -> impl Future<Output = Result<(usize, u64), Error>> + Send;

    /// Takes the item at `end` of the array at `key`.
    fn take(&self, key: &str, end: End) -> impl Future<Output = Result<Taken, Error>> + Send;

    /// Deletes `key`; whether it was there.
    fn delete(&self, key: &str) -> impl Future<Output = Result<bool, Error>> + Send;
}

/// Checks a key: 1..=256 bytes, no control characters ([`Error::BadKey`]).
pub fn check_key(key: &str) -> Result<(), Error> {
    let reason = if key.is_empty() {
        "a key is not empty"
    } else if key.len() > KEY_MAX {
        "a key is at most 256 bytes"
    } else if key.chars().any(char::is_control) {
        "a key holds no control characters"
    } else {
        return Ok(());
    };
    Err(Error::BadKey { reason })
}

/// The size of `value` serialized compactly, when it is at most `max`
/// ([`Error::TooLarge`] of `what` when past it).
pub fn check_value(what: &'static str, value: &Value, max: usize) -> Result<usize, Error> {
    let size = serialized_len(value);
    if size > max {
        return Err(Error::TooLarge { what, size, max });
    }
    Ok(size)
}

/// The length of `value`'s compact serialization.
pub fn serialized_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` into a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Key {
    key: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Set {
    key: String,
    value: Value,
    expected_version: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct List {
    #[serde(default)]
    prefix: String,
    after: Option<String>,
    limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Push {
    key: String,
    value: Value,
}

/// Runs memory tool `tool` on `memory`, its arguments checked against its schema.
pub(crate) async fn call(
    memory: &impl Memory,
    tool: &str,
    arguments: Value,
) -> Result<Value, Error> {
    match tool {
        "memory.get" => {
            let Key { key } = parse(tool, arguments)?;
            check_key(&key)?;
            Ok(match memory.get(&key).await? {
                Some(v) => json!({"value": v.value, "version": v.version}),
                None => json!({"value": null, "version": 0}),
            })
        }
        "memory.set" => {
            let args: Set = parse(tool, arguments)?;
            check_key(&args.key)?;
            check_value("value", &args.value, memory.max_value_bytes())?;
            let version = memory
                .set(&args.key, args.value, args.expected_version)
                .await?;
            Ok(json!({"version": version}))
        }
        "memory.list" => {
            let args: List = parse(tool, arguments)?;
            let limit = args.limit.unwrap_or(LIST_DEFAULT);
            if limit > LIST_MAX {
                return Err(Error::TooLarge {
                    what: "limit",
                    size: limit,
                    max: LIST_MAX,
                });
            }
            let page = memory
                .list(&args.prefix, args.after.as_deref(), limit)
                .await?;
            let next = match (page.more, page.keys.last()) {
                (true, Some(last)) => json!(last.key),
                _ => Value::Null,
            };
            let keys: Vec<Value> = page
                .keys
                .into_iter()
                .map(|e| json!({"key": e.key, "version": e.version, "bytes": e.bytes}))
                .collect();
            Ok(json!({"keys": keys, "next": next}))
        }
        "memory.push" => {
            let Push { key, value } = parse(tool, arguments)?;
            check_key(&key)?;
            let (length, version) = memory.push(&key, value).await?;
            Ok(json!({"length": length, "version": version}))
        }
        "memory.shift" | "memory.pop" => {
            let Key { key } = parse(tool, arguments)?;
            check_key(&key)?;
            let end = if tool == "memory.shift" {
                End::First
            } else {
                End::Last
            };
            Ok(match memory.take(&key, end).await? {
                Taken::Item(v) => json!({"value": v.value, "version": v.version}),
                Taken::Empty { version } => {
                    json!({"value": null, "empty": true, "version": version})
                }
            })
        }
        _ => {
            let Key { key } = parse(tool, arguments)?;
            check_key(&key)?;
            Ok(json!({"deleted": memory.delete(&key).await?}))
        }
    }
}
