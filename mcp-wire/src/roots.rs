//! Roots: the places a client lets a server work in, listed by `roots/list`.

use serde::{Deserialize, Serialize};

use crate::Meta;

/// One root: a `file://` URI, with an optional name.
///
/// ```
/// use mcp_wire::Root;
///
/// let root = Root::new("file:///home/me/project").with_name("project");
/// assert_eq!(serde_json::to_string(&root).unwrap(),
///     r#"{"uri":"file:///home/me/project","name":"project"}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Root {
    /// The root's URI.
    pub uri: String,
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl Root {
    /// A root without a name.
    pub fn new(uri: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            name: None,
            meta: None,
        }
    }

    /// The same root, named.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

/// The answer to `roots/list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ListRootsResult {
    /// The roots.
    pub roots: Vec<Root>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ListRootsResult {
    /// The answer listing `roots`.
    pub fn new(roots: Vec<Root>) -> Self {
        Self { roots, meta: None }
    }
}
