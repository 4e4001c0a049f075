//! The memory: instance-wide keys, each holding a JSON value (kept as its compact
//! serialization) and a version. A key's first write makes version 1 and every change (set,
//! push, shift, pop) adds 1; a delete forgets the key, so writing it again starts at 1.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

use super::db::{Db, check_size, from_sql, to_sql};
use super::error::Error;
use super::handle::Store;

// The tools' bounds, kept here too: the store takes nothing past them, and answers
// `LIST_DEFAULT` keys when not told how many.
pub(crate) use agentd_tools::memory::{KEY_MAX, LIST_DEFAULT, LIST_MAX};

/// A key's value and version: `Null` and 0 when the key is absent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Versioned {
    /// The value.
    pub(crate) value: Value,
    /// Its version.
    pub(crate) version: u64,
}

/// A key as [`Store::memory_list`] tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listed {
    /// The key.
    pub(crate) key: String,
    /// Its version.
    pub(crate) version: u64,
    /// Its value's size, in bytes of compact JSON.
    pub(crate) bytes: u64,
}

/// A page of [`Store::memory_list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Page {
    /// The keys, in byte order.
    pub(crate) keys: Vec<Listed>,
    /// The last key of the page when more follow (the next page's `after`), else `None`.
    pub(crate) next: Option<String>,
}

/// What a push made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pushed {
    /// The array's length after it.
    pub(crate) length: u64,
    /// The key's version after it.
    pub(crate) version: u64,
}

/// What a shift or a pop took.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Taken {
    /// The item, or `None` when the array was empty or the key absent (nothing changed).
    pub(crate) value: Option<Value>,
    /// The key's version after it (0: absent).
    pub(crate) version: u64,
}

/// Which end of the array a take is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    First,
    Last,
}

/// `BadKey` unless `key` is 1..=256 bytes without control characters.
fn check_key(key: &str) -> Result<(), Error> {
    let rule = if key.is_empty() {
        "a key is at least 1 byte"
    } else if key.len() > KEY_MAX {
        "a key is at most 256 bytes"
    } else if key.chars().any(char::is_control) {
        "a key has no control characters"
    } else {
        return Ok(());
    };
    Err(Error::BadKey { rule })
}

/// `value`'s compact JSON, unless it is past `limit`.
fn serialize(value: &Value, limit: usize) -> Result<String, Error> {
    let text = value.to_string();
    check_size("value", text.len(), limit)?;
    Ok(text)
}

/// `key`'s value (parsed) and version.
fn current(tx: &Connection, key: &str) -> Result<Option<(Value, u64)>, Error> {
    let row: Option<(String, i64)> = tx
        .prepare_cached("SELECT value, version FROM memory WHERE key = ?1")?
        .query_row(params![key], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    row.map(|(text, version)| Ok((parse(&text)?, from_sql(version))))
        .transpose()
}

fn parse(text: &str) -> Result<Value, Error> {
    serde_json::from_str(text).map_err(Error::Corrupt)
}

/// Writes `text` as `key`'s value at `version`, in `tx`.
fn write(tx: &Connection, key: &str, text: &str, version: u64) -> Result<(), Error> {
    tx.prepare_cached(
        "INSERT INTO memory (key, value, version) VALUES (?1, ?2, ?3)
         ON CONFLICT (key) DO UPDATE SET value = ?2, version = ?3",
    )?
    .execute(params![key, text, to_sql(version)])?;
    Ok(())
}

impl Db {
    fn memory_get(&mut self, key: &str) -> Result<Versioned, Error> {
        check_key(key)?;
        let (value, version) = current(&self.sql, key)?.unwrap_or((Value::Null, 0));
        Ok(Versioned { value, version })
    }

    fn memory_set(
        &mut self,
        key: &str,
        value: &Value,
        expected_version: Option<u64>,
    ) -> Result<u64, Error> {
        check_key(key)?;
        let text = serialize(value, self.limits.max_value_bytes)?;
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let version = current(&tx, key)?.map_or(0, |(_, v)| v);
        if expected_version.is_some_and(|expected| expected != version) {
            return Err(Error::VersionMismatch { current: version });
        }
        write(&tx, key, &text, version + 1)?;
        tx.commit()?;
        Ok(version + 1)
    }

    fn memory_list(
        &mut self,
        prefix: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Page, Error> {
        let limit = limit.unwrap_or(LIST_DEFAULT);
        if !(1..=LIST_MAX).contains(&limit) {
            return Err(Error::invalid(
                "/limit",
                format!("1..={LIST_MAX}, not {limit}"),
            ));
        }
        // Keys in byte order (SQLite's `BINARY` collation compares UTF-8 bytes): those with
        // the prefix are together, from the first at or after it.
        let mut query = self.sql.prepare_cached(
            "SELECT key, version, length(CAST(value AS BLOB)) FROM memory
             WHERE key > ?1 AND key >= ?2 ORDER BY key",
        )?;
        let mut rows = query.query(params![after.unwrap_or(""), prefix])?;
        let mut keys = Vec::new();
        let mut more = false;
        while let Some(row) = rows.next()? {
            let key: String = row.get(0)?;
            if !key.starts_with(prefix) {
                break;
            }
            if keys.len() == limit {
                more = true;
                break;
            }
            keys.push(Listed {
                key,
                version: from_sql(row.get(1)?),
                bytes: from_sql(row.get(2)?),
            });
        }
        let next = if more {
            keys.last().map(|k| k.key.clone())
        } else {
            None
        };
        Ok(Page { keys, next })
    }

    fn memory_push(&mut self, key: &str, value: Value) -> Result<Pushed, Error> {
        check_key(key)?;
        let limit = self.limits.max_value_bytes;
        serialize(&value, limit)?;
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let (array, version) = match current(&tx, key)? {
            None => (vec![value], 0),
            Some((Value::Array(mut items), version)) => {
                items.push(value);
                (items, version)
            }
            Some(_) => return Err(Error::NotAnArray),
        };
        let length = array.len() as u64;
        let text = serialize(&Value::Array(array), limit)?;
        write(&tx, key, &text, version + 1)?;
        tx.commit()?;
        Ok(Pushed {
            length,
            version: version + 1,
        })
    }

    fn memory_take(&mut self, key: &str, end: End) -> Result<Taken, Error> {
        check_key(key)?;
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let (mut items, version) = match current(&tx, key)? {
            None => (Vec::new(), 0),
            Some((Value::Array(items), version)) => (items, version),
            Some(_) => return Err(Error::NotAnArray),
        };
        let taken = match end {
            End::First if !items.is_empty() => Some(items.remove(0)),
            End::First => None,
            End::Last => items.pop(),
        };
        let Some(value) = taken else {
            return Ok(Taken {
                value: None,
                version,
            });
        };
        // Smaller than what was kept: within the bound.
        write(&tx, key, &Value::Array(items).to_string(), version + 1)?;
        tx.commit()?;
        Ok(Taken {
            value: Some(value),
            version: version + 1,
        })
    }

    fn memory_delete(&mut self, key: &str) -> Result<bool, Error> {
        check_key(key)?;
        let deleted = self
            .sql
            .prepare_cached("DELETE FROM memory WHERE key = ?1")?
            .execute(params![key])?;
        Ok(deleted > 0)
    }
}

impl Store {
    /// `memory.get`: `key`'s value and version (`Null` and 0 when absent).
    pub(crate) fn memory_get(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Versioned, Error>> + Send + use<> {
        let key = key.to_owned();
        self.run(move |db| db.memory_get(&key))
    }

    /// `memory.set`: keeps `value` at `key`; with `expected_version`, only when the key's
    /// version is that (0: absent), else [`Error::VersionMismatch`]. The key's new version.
    pub(crate) fn memory_set(
        &self,
        key: &str,
        value: Value,
        expected_version: Option<u64>,
    ) -> impl Future<Output = Result<u64, Error>> + Send + use<> {
        let key = key.to_owned();
        self.run(move |db| db.memory_set(&key, &value, expected_version))
    }

    /// `memory.list`: up to `limit` (1..=100, default 50) keys starting with `prefix` (all
    /// when empty), strictly after `after`, in byte order.
    pub(crate) fn memory_list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> impl Future<Output = Result<Page, Error>> + Send + use<> {
        let (prefix, after) = (prefix.to_owned(), after.map(str::to_owned));
        self.run(move |db| db.memory_list(&prefix, after.as_deref(), limit))
    }

    /// `memory.push`: appends `value` to the array at `key` (an absent key becomes
    /// `[value]`); the array after it must fit the value bound too.
    pub(crate) fn memory_push(
        &self,
        key: &str,
        value: Value,
    ) -> impl Future<Output = Result<Pushed, Error>> + Send + use<> {
        let key = key.to_owned();
        self.run(move |db| db.memory_push(&key, value))
    }

    /// `memory.shift`: removes and answers the array's first item.
    pub(crate) fn memory_shift(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Taken, Error>> + Send + use<> {
        let key = key.to_owned();
        self.run(move |db| db.memory_take(&key, End::First))
    }

    /// `memory.pop`: removes and answers the array's last item.
    pub(crate) fn memory_pop(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Taken, Error>> + Send + use<> {
        let key = key.to_owned();
        self.run(move |db| db.memory_take(&key, End::Last))
    }

    /// `memory.delete`: forgets `key`; whether it was there.
    pub(crate) fn memory_delete(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<bool, Error>> + Send + use<> {
        let key = key.to_owned();
        self.run(move |db| db.memory_delete(&key))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use super::super::{Limits, scratch};
    use super::*;

    #[tokio::test]
    async fn set_get_delete() {
        let (_dir, store) = scratch().await;
        let absent = store.memory_get("k").await.unwrap();
        assert_eq!((absent.value, absent.version), (Value::Null, 0));
        assert_eq!(
            store
                .memory_set("k", json!({"a": [1]}), None)
                .await
                .unwrap(),
            1
        );
        assert_eq!(store.memory_set("k", json!(null), None).await.unwrap(), 2);
        let got = store.memory_get("k").await.unwrap();
        assert_eq!((got.value, got.version), (Value::Null, 2));
        assert!(store.memory_delete("k").await.unwrap());
        assert!(!store.memory_delete("k").await.unwrap());
        // A key written after its delete starts again.
        assert_eq!(store.memory_set("k", json!(1), None).await.unwrap(), 1);
    }

    /// A set with a stale version fails with the current one and changes nothing.
    #[tokio::test]
    async fn compare_and_set() {
        let (_dir, store) = scratch().await;
        assert_eq!(store.memory_set("k", json!("a"), Some(0)).await.unwrap(), 1);
        let stale = store
            .memory_set("k", json!("b"), Some(0))
            .await
            .unwrap_err();
        assert!(
            matches!(stale, Error::VersionMismatch { current: 1 }),
            "{stale:?}"
        );
        assert_eq!(stale.code(), "version_mismatch");
        let stale = store
            .memory_set("k", json!("b"), Some(7))
            .await
            .unwrap_err();
        assert!(
            matches!(stale, Error::VersionMismatch { current: 1 }),
            "{stale:?}"
        );
        let got = store.memory_get("k").await.unwrap();
        assert_eq!((got.value, got.version), (json!("a"), 1));
        assert_eq!(store.memory_set("k", json!("b"), Some(1)).await.unwrap(), 2);
        // An absent key's version is 0.
        let absent = store.memory_set("n", json!(1), Some(1)).await.unwrap_err();
        assert!(
            matches!(absent, Error::VersionMismatch { current: 0 }),
            "{absent:?}"
        );
        assert_eq!(store.memory_get("n").await.unwrap().version, 0);
    }

    #[tokio::test]
    async fn keys_are_bounded() {
        let (_dir, store) = scratch().await;
        let at = "k".repeat(KEY_MAX);
        assert_eq!(store.memory_set(&at, json!(1), None).await.unwrap(), 1);
        let past = "k".repeat(KEY_MAX + 1);
        for bad in [past.as_str(), "", "a\nb", "a\u{7f}"] {
            let e = store.memory_set(bad, json!(1), None).await.unwrap_err();
            assert!(matches!(e, Error::BadKey { .. }), "{bad:?}: {e:?}");
            assert_eq!(e.code(), "bad_key");
            let e = store.memory_get(bad).await.unwrap_err();
            assert!(matches!(e, Error::BadKey { .. }), "{bad:?}: {e:?}");
        }
        // A multi-byte key is counted in bytes: 128 two-byte characters fit, 129 do not.
        let two = "é".repeat(KEY_MAX / 2);
        store.memory_set(&two, json!(1), None).await.unwrap();
        let e = store
            .memory_set(&format!("{two}é"), json!(1), None)
            .await
            .unwrap_err();
        assert!(matches!(e, Error::BadKey { .. }), "{e:?}");
    }

    /// A string value whose compact JSON is `bytes` long.
    fn sized(bytes: usize) -> Value {
        Value::String("x".repeat(bytes - 2))
    }

    #[tokio::test]
    async fn values_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            max_value_bytes: 1024,
        };
        let store = Store::open(dir.path(), limits).await.unwrap();
        assert_eq!(store.memory_set("k", sized(1024), None).await.unwrap(), 1);
        let e = store.memory_set("k", sized(1025), None).await.unwrap_err();
        assert!(
            matches!(
                e,
                Error::TooLarge {
                    what: "value",
                    bytes: 1025,
                    limit: 1024
                }
            ),
            "{e:?}"
        );
        assert_eq!(e.code(), "too_large");
        let got = store.memory_get("k").await.unwrap();
        assert_eq!((got.value, got.version), (sized(1024), 1));

        // A push: the item, and the array after it. `[` + item + `]` is 2 bytes more.
        let e = store.memory_push("q", sized(1025)).await.unwrap_err();
        assert!(matches!(e, Error::TooLarge { .. }), "{e:?}");
        assert_eq!(
            store.memory_push("q", sized(1022)).await.unwrap(),
            Pushed {
                length: 1,
                version: 1
            }
        );
        let e = store.memory_push("q", json!(1)).await.unwrap_err();
        assert!(
            matches!(
                e,
                Error::TooLarge {
                    what: "value",
                    bytes: 1026,
                    ..
                }
            ),
            "{e:?}"
        );
        let got = store.memory_get("q").await.unwrap();
        assert_eq!((got.value, got.version), (json!([sized(1022)]), 1));
    }

    #[tokio::test]
    async fn push_shift_pop() {
        let (_dir, store) = scratch().await;
        let empty = Taken {
            value: None,
            version: 0,
        };
        assert_eq!(store.memory_shift("q").await.unwrap(), empty);
        assert_eq!(store.memory_pop("q").await.unwrap(), empty);
        for (i, item) in [json!(1), json!("two"), json!({"three": 3})]
            .into_iter()
            .enumerate()
        {
            let n = i as u64 + 1;
            assert_eq!(
                store.memory_push("q", item).await.unwrap(),
                Pushed {
                    length: n,
                    version: n
                }
            );
        }
        let shifted = store.memory_shift("q").await.unwrap();
        assert_eq!(
            shifted,
            Taken {
                value: Some(json!(1)),
                version: 4
            }
        );
        let popped = store.memory_pop("q").await.unwrap();
        assert_eq!(
            popped,
            Taken {
                value: Some(json!({"three": 3})),
                version: 5
            }
        );
        assert_eq!(store.memory_get("q").await.unwrap().value, json!(["two"]));
        assert_eq!(
            store.memory_pop("q").await.unwrap(),
            Taken {
                value: Some(json!("two")),
                version: 6
            }
        );
        // Empty: nothing taken, nothing changed.
        assert_eq!(
            store.memory_shift("q").await.unwrap(),
            Taken {
                value: None,
                version: 6
            }
        );
        let got = store.memory_get("q").await.unwrap();
        assert_eq!((got.value, got.version), (json!([]), 6));
    }

    #[tokio::test]
    async fn a_non_array_is_refused() {
        let (_dir, store) = scratch().await;
        store.memory_set("k", json!({"a": 1}), None).await.unwrap();
        for e in [
            store.memory_push("k", json!(1)).await.unwrap_err(),
            store.memory_shift("k").await.unwrap_err(),
            store.memory_pop("k").await.unwrap_err(),
        ] {
            assert!(matches!(e, Error::NotAnArray), "{e:?}");
            assert_eq!(e.code(), "not_an_array");
        }
        let got = store.memory_get("k").await.unwrap();
        assert_eq!((got.value, got.version), (json!({"a": 1}), 1));
    }

    /// Many tasks shifting one queue at once: every item is taken once, none is lost.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_shifts_take_each_item_once() {
        const ITEMS: u64 = 400;
        const TASKS: usize = 16;
        let (_dir, store) = scratch().await;
        for i in 0..ITEMS {
            store.memory_push("q", json!(i)).await.unwrap();
        }
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..TASKS {
            let store = store.clone();
            tasks.spawn(async move {
                let mut taken = Vec::new();
                while let Some(item) = store.memory_shift("q").await.unwrap().value {
                    taken.push(item.as_u64().unwrap());
                }
                taken
            });
        }
        let mut all = Vec::new();
        while let Some(taken) = tasks.join_next().await {
            all.extend(taken.unwrap());
        }
        let distinct: BTreeSet<u64> = all.iter().copied().collect();
        assert_eq!(all.len(), distinct.len(), "an item was taken twice");
        assert_eq!(distinct, (0..ITEMS).collect());
        assert_eq!(store.memory_get("q").await.unwrap().version, 2 * ITEMS);
    }

    fn keys(page: &Page) -> Vec<&str> {
        page.keys.iter().map(|k| k.key.as_str()).collect()
    }

    #[tokio::test]
    async fn list_pages_by_prefix() {
        let (_dir, store) = scratch().await;
        for key in ["a/1", "a/2", "a/3", "a0", "b/1", "a", "a/é"] {
            store.memory_set(key, json!(key), None).await.unwrap();
        }
        store.memory_set("a/2", json!([1, 2]), None).await.unwrap();
        let page = store.memory_list("a/", None, Some(2)).await.unwrap();
        assert_eq!(keys(&page), ["a/1", "a/2"]);
        assert_eq!(page.next.as_deref(), Some("a/2"));
        assert_eq!(
            page.keys[1],
            Listed {
                key: "a/2".into(),
                version: 2,
                bytes: 5
            }
        );
        let page = store
            .memory_list("a/", page.next.as_deref(), Some(2))
            .await
            .unwrap();
        // Byte order: `é` (0xC3 0xA9) after `3`.
        assert_eq!(keys(&page), ["a/3", "a/é"]);
        assert_eq!(page.next, None);
        // `"a/é"` is 6 bytes of JSON.
        assert_eq!(page.keys[1].bytes, 6);
        let all = store.memory_list("", None, None).await.unwrap();
        assert_eq!(keys(&all), ["a", "a/1", "a/2", "a/3", "a/é", "a0", "b/1"]);
        assert_eq!(all.next, None);
        let none = store.memory_list("c", None, None).await.unwrap();
        assert_eq!((none.keys.len(), none.next), (0, None));
    }

    #[tokio::test]
    async fn list_limit_is_1_to_100() {
        let (_dir, store) = scratch().await;
        for i in 0..=LIST_MAX {
            store
                .memory_set(&format!("k{i:03}"), json!(i), None)
                .await
                .unwrap();
        }
        let page = store.memory_list("k", None, Some(LIST_MAX)).await.unwrap();
        assert_eq!(page.keys.len(), LIST_MAX);
        assert_eq!(page.next.as_deref(), Some("k099"));
        let rest = store
            .memory_list("k", page.next.as_deref(), Some(LIST_MAX))
            .await
            .unwrap();
        assert_eq!((keys(&rest), rest.next.as_deref()), (vec!["k100"], None));
        assert_eq!(
            store.memory_list("k", None, None).await.unwrap().keys.len(),
            LIST_DEFAULT
        );
        for bad in [0, LIST_MAX + 1] {
            let e = store.memory_list("k", None, Some(bad)).await.unwrap_err();
            assert!(
                matches!(&e, Error::Invalid { pointer, .. } if pointer == "/limit"),
                "{e:?}"
            );
            assert_eq!(e.code(), "invalid_arguments");
        }
    }
}
