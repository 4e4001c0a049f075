//! Pagination: cursors, the params of a list request, and one page of a list result.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::result::ttl_ms;
use crate::{CacheScope, Meta, ResultType};

/// An opaque pagination cursor. An empty string is a cursor like any other: only a missing
/// (or `null`) `nextCursor` ends a list.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Cursor(pub String);

/// The params of a paginated list request (`tools/list`, `resources/list`,
/// `resources/templates/list`, `prompts/list`, `events/list`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PageParams {
    /// Where to continue; `None` for the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl PageParams {
    /// The params for the page at `cursor` (`None`: the first).
    pub fn new(cursor: Option<Cursor>, meta: Option<Meta>) -> Self {
        Self { cursor, meta }
    }
}

/// What a list result holds: the member its items are under (`tools`, `resources`, …).
pub trait PageItem {
    /// The member name of the item array.
    const KEY: &'static str;
}

/// One page of a list result: its items, the cursor of the next page, and the members every
/// 2026-07-28 list result carries, kept as sent.
///
/// ```
/// use mcp_wire::ListToolsResult;
///
/// let page: ListToolsResult = serde_json::from_str(
///     r#"{"tools":[{"name":"add","inputSchema":{"type":"object"}}],"nextCursor":""}"#,
/// ).unwrap();
/// assert_eq!(page.items[0].name, "add");
/// assert_eq!(page.next_cursor.as_ref().unwrap().0, ""); // an empty cursor is still a cursor
/// assert_eq!(page.ttl_ms(), 0);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Page<T> {
    /// The items.
    pub items: Vec<T>,
    /// The cursor of the next page; `None` at the end.
    pub next_cursor: Option<Cursor>,
    /// `resultType`, when sent.
    pub result_type: Option<ResultType>,
    /// `ttlMs`, when sent (see [`Page::ttl_ms`]).
    pub ttl_ms: Option<i64>,
    /// `cacheScope`, when sent.
    pub cache_scope: Option<CacheScope>,
    /// `_meta`.
    pub meta: Option<Meta>,
}

impl<T> Page<T> {
    /// A page holding `items`, followed by the page at `next_cursor`.
    pub fn new(items: Vec<T>, next_cursor: Option<Cursor>) -> Self {
        Self {
            items,
            next_cursor,
            result_type: None,
            ttl_ms: None,
            cache_scope: None,
            meta: None,
        }
    }

    /// How long the page stays fresh, in milliseconds: a missing or negative `ttlMs` is 0.
    pub fn ttl_ms(&self) -> u64 {
        ttl_ms(self.ttl_ms)
    }

    /// The cache scope: a missing one is private.
    pub fn cache_scope(&self) -> CacheScope {
        self.cache_scope.unwrap_or_default()
    }
}

impl<T: PageItem + Serialize> Serialize for Page<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(rt) = &self.result_type {
            map.serialize_entry("resultType", rt)?;
        }
        map.serialize_entry(T::KEY, &self.items)?;
        if let Some(c) = &self.next_cursor {
            map.serialize_entry("nextCursor", c)?;
        }
        if let Some(t) = &self.ttl_ms {
            map.serialize_entry("ttlMs", t)?;
        }
        if let Some(s) = &self.cache_scope {
            map.serialize_entry("cacheScope", s)?;
        }
        if let Some(m) = &self.meta {
            map.serialize_entry("_meta", m)?;
        }
        map.end()
    }
}

enum Field {
    Items,
    NextCursor,
    ResultType,
    TtlMs,
    CacheScope,
    Meta,
    Other,
}

struct FieldSeed(&'static str);

impl<'de> DeserializeSeed<'de> for FieldSeed {
    type Value = Field;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Field, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl Visitor<'_> for FieldSeed {
    type Value = Field;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Field, E> {
        Ok(match key {
            k if k == self.0 => Field::Items,
            "nextCursor" => Field::NextCursor,
            "resultType" => Field::ResultType,
            "ttlMs" => Field::TtlMs,
            "cacheScope" => Field::CacheScope,
            "_meta" => Field::Meta,
            _ => Field::Other,
        })
    }
}

struct PageVisitor<T>(PhantomData<T>);

impl<'de, T: PageItem + Deserialize<'de>> Visitor<'de> for PageVisitor<T> {
    type Value = Page<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a list result with `{}`", T::KEY)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Page<T>, A::Error> {
        fn once<V, E: de::Error>(slot: &mut Option<V>, v: V, name: &'static str) -> Result<(), E> {
            match slot.replace(v) {
                Some(_) => Err(E::duplicate_field(name)),
                None => Ok(()),
            }
        }
        let mut items = None;
        let mut page = Page::new(Vec::new(), None);
        while let Some(field) = map.next_key_seed(FieldSeed(T::KEY))? {
            match field {
                Field::Items => once(&mut items, map.next_value()?, T::KEY)?,
                Field::NextCursor => page.next_cursor = map.next_value()?,
                Field::ResultType => page.result_type = map.next_value()?,
                Field::TtlMs => page.ttl_ms = map.next_value()?,
                Field::CacheScope => page.cache_scope = map.next_value()?,
                Field::Meta => page.meta = map.next_value()?,
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        page.items = items.ok_or_else(|| de::Error::missing_field(T::KEY))?;
        Ok(page)
    }
}

impl<'de, T: PageItem + Deserialize<'de>> Deserialize<'de> for Page<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(PageVisitor(PhantomData))
    }
}
