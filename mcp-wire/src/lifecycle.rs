//! Opening a connection: `initialize` (legacy) and `server/discover` (2026-07-28).

use serde::{Deserialize, Serialize};

use crate::result::ttl_ms;
use crate::{
    CacheScope, ClientCapabilities, Error, Implementation, Meta, ResultType, Revision,
    ServerCapabilities, meta,
};

/// The params of `initialize`.
///
/// ```
/// use mcp_wire::{ClientCapabilities, Implementation, InitializeParams, Revision};
///
/// let p = InitializeParams::new(Revision::V2025_11_25, ClientCapabilities::none(),
///     Implementation::new("my-client", "0.1.0"));
/// assert_eq!(serde_json::to_string(&p).unwrap(),
///     r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"my-client","version":"0.1.0"}}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct InitializeParams {
    /// The revision the client asks for, as a string (a server may be offered anything).
    pub protocol_version: String,
    /// What the client can do.
    pub capabilities: ClientCapabilities,
    /// Who the client is.
    pub client_info: Implementation,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl InitializeParams {
    /// The params offering `revision`.
    pub fn new(
        revision: Revision,
        capabilities: ClientCapabilities,
        client_info: Implementation,
    ) -> Self {
        Self {
            protocol_version: revision.as_str().into(),
            capabilities,
            client_info,
            meta: None,
        }
    }
}

/// The result of `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct InitializeResult {
    /// The revision the server chose, as sent (it may be one this crate does not know).
    pub protocol_version: String,
    /// What the server offers.
    pub capabilities: ServerCapabilities,
    /// Who the server is.
    pub server_info: Implementation,
    /// Instructions for the model, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl InitializeResult {
    /// The revision the server chose, if this crate knows it.
    pub fn revision(&self) -> Result<Revision, Error> {
        self.protocol_version.parse()
    }
}

/// The params of `server/discover`: only the request `_meta`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DiscoverParams {
    /// `_meta`, with the three keys of [`crate::ModernMeta`].
    #[serde(rename = "_meta", default)]
    pub meta: Meta,
}

impl DiscoverParams {
    /// The params with this `_meta`.
    pub fn new(meta: Meta) -> Self {
        Self { meta }
    }
}

/// The result of `server/discover`.
///
/// A result without `resultType`, `ttlMs` or `cacheScope` is accepted, and the accessors read
/// them as complete, 0 and private. `instructions` is not read.
///
/// ```
/// use mcp_wire::{CacheScope, DiscoverResult, ResultType};
///
/// let d: DiscoverResult = serde_json::from_str(r#"{"supportedVersions":["2026-07-28"],
///     "capabilities":{},"instructions":"ignored",
///     "_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}"#).unwrap();
/// assert_eq!(d.result_type(), ResultType::Complete);
/// assert_eq!(d.ttl_ms(), 0);
/// assert_eq!(d.cache_scope(), CacheScope::Private);
/// assert_eq!(d.server_info().unwrap().name, "s");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DiscoverResult {
    /// `resultType`, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// The revisions the server speaks, as sent.
    pub supported_versions: Vec<String>,
    /// What the server offers.
    pub capabilities: ServerCapabilities,
    /// `ttlMs`, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<i64>,
    /// `cacheScope`, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// `_meta`, where `serverInfo` lives.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl DiscoverResult {
    /// A complete result listing `supported` revisions.
    pub fn new(supported: &[Revision], capabilities: ServerCapabilities) -> Self {
        Self {
            result_type: Some(ResultType::Complete),
            supported_versions: supported.iter().map(|r| r.as_str().into()).collect(),
            capabilities,
            ttl_ms: Some(0),
            cache_scope: Some(CacheScope::Private),
            meta: None,
        }
    }

    /// `resultType`, complete when missing.
    pub fn result_type(&self) -> ResultType {
        self.result_type.unwrap_or_default()
    }

    /// `ttlMs`, 0 when missing or negative.
    pub fn ttl_ms(&self) -> u64 {
        ttl_ms(self.ttl_ms)
    }

    /// `cacheScope`, private when missing.
    pub fn cache_scope(&self) -> CacheScope {
        self.cache_scope.unwrap_or_default()
    }

    /// `_meta["io.modelcontextprotocol/serverInfo"]`, if present and well formed.
    pub fn server_info(&self) -> Option<Implementation> {
        let info = self.meta.as_ref()?.get(meta::key::SERVER_INFO)?;
        Implementation::deserialize(info).ok()
    }

    /// The newest revision the server lists that this crate knows.
    pub fn newest_known(&self) -> Option<Revision> {
        Revision::newest_known(&self.supported_versions)
    }
}
