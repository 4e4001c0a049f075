//! `Implementation`: who a client or server says it is.

use serde::{Deserialize, Serialize};

/// The name and version a client (`clientInfo`) or server (`serverInfo`) reports.
///
/// Self-reported: nothing should trust it for security or behaviour.
///
/// ```
/// use mcp_wire::Implementation;
///
/// let mut info = Implementation::new("my-client", "0.1.0");
/// info.title = Some("my-agent".into());
/// assert_eq!(
///     serde_json::to_string(&info).unwrap(),
///     r#"{"name":"my-client","version":"0.1.0","title":"my-agent"}"#,
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Implementation {
    /// The programmatic name.
    pub name: String,
    /// The version string.
    pub version: String,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Icons for a user interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// A website.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website_url: Option<String>,
}

impl Implementation {
    /// A name and a version, nothing else.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            title: None,
            description: None,
            icons: None,
            website_url: None,
        }
    }
}

/// An icon of an implementation, tool, prompt or resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Icon {
    /// The icon's URI (`https:` or `data:`).
    pub src: String,
    /// Its media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Sizes, e.g. `"48x48"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<Vec<String>>,
    /// `"light"` or `"dark"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theme: Option<String>,
}
