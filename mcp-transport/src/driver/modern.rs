//! The 2026-07-28 transport: stateless requests that carry their revision in a header.

use std::pin::pin;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use mcp_wire::{RequestId, Revision};
use serde::de::DeserializeOwned;

use super::call::Call;
use super::client::{HttpClient, Silence};
use super::legacy::answer;
use crate::Error;
use crate::headers::{ACCEPT_POST, modern};

/// A modern connection's transport: no session; every POST carries `MCP-Protocol-Version`
/// (equal to the `_meta` revision), `Mcp-Method`, `Mcp-Name` on a call, read or prompt, and
/// the `Mcp-Param-*` headers of the tool's annotated arguments.
///
/// Cancelling a call is dropping it: its response stream closes and the server sees it.
#[derive(Debug, Clone)]
pub struct ModernTransport {
    client: HttpClient,
    revision: Revision,
}

/// What a modern request needs besides its body.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct Routing<'a> {
    /// `Mcp-Name`: `params.name` of `tools/call` and `prompts/get`, `params.uri` of
    /// `resources/read`.
    pub name: Option<&'a str>,
    /// The `Mcp-Param-*` headers, from [`mcp_wire::ToolHeaders::derive`].
    pub params: &'a [(String, String)],
    /// The silence bound of this call, when not the transport's (e.g. a listen's).
    pub silence: Option<Duration>,
}

impl<'a> Routing<'a> {
    /// Routing with a name.
    pub fn named(name: &'a str) -> Self {
        Self {
            name: Some(name),
            ..Self::default()
        }
    }
}

impl ModernTransport {
    /// A transport over `client` speaking `revision`.
    pub fn new(client: HttpClient, revision: Revision) -> Self {
        Self { client, revision }
    }

    /// The revision every request states.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// Sends a request (the encoded message in `body`, whose `_meta` states the same
    /// revision) and returns its answer as it comes.
    pub async fn call<T: DeserializeOwned>(
        &self,
        id: RequestId,
        method_name: &str,
        body: Bytes,
        routing: Routing<'_>,
    ) -> Result<Call<T>, Error> {
        let silence = routing.silence.unwrap_or(self.client.config().silence);
        let standard = modern(self.revision, method_name, routing.name);
        let mut headers: Vec<(&str, &str)> =
            standard.iter().map(|(k, v)| (*k, v.as_ref())).collect();
        headers.extend(routing.params.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let timer = pin!(tokio::time::sleep(silence));
        let mut silence = Silence::new(timer, silence);
        let response = self
            .client
            .send(
                Method::POST,
                Some(body),
                ACCEPT_POST,
                &headers,
                &mut silence,
            )
            .await?;
        answer(&self.client, id, response, &mut silence, None).await
    }
}
