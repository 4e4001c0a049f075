//! The 2026-07-28 transport: stateless requests that carry their revision in a header.

use std::borrow::Cow;
use std::pin::pin;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use http::header::{HeaderName, HeaderValue};
use mcp_wire::header::{PARAM_PREFIX, encode_value};
use mcp_wire::{RequestId, Revision, ToolHeaders, method};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::call::Call;
use super::client::{HttpClient, Silence, names};
use super::legacy::answer;
use crate::Error;
use crate::headers::{ACCEPT_POST, MCP_METHOD, MCP_NAME};

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

/// What a modern request needs besides its body: its routing headers, built.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Routing {
    /// `Mcp-Name`: `params.name` of `tools/call` and `prompts/get`, `params.uri` of
    /// `resources/read`, encoded by the `=?base64?…?=` rule ([`Routing::named`]).
    pub name: Option<HeaderValue>,
    /// The `Mcp-Param-*` headers of the tool's annotated arguments ([`ToolRoute::routing`]).
    pub params: Vec<(HeaderName, HeaderValue)>,
    /// The silence bound of this call, when not the transport's (e.g. a listen's).
    pub silence: Option<Duration>,
}

impl Routing {
    /// Routing with a name, encoded when it is not plain ASCII.
    pub fn named(name: &str) -> Result<Self, Error> {
        Ok(Self {
            name: Some(header_value(MCP_NAME, encode_value(name))?),
            ..Self::default()
        })
    }
}

/// How calls to one tool are routed: what depends on the tool alone (its `Mcp-Name`, the
/// names of its `Mcp-Param-*` headers) built once, so that a call derives only the values
/// its arguments give.
#[derive(Debug, Clone)]
pub struct ToolRoute {
    name: HeaderValue,
    headers: ToolHeaders,
    /// `Mcp-Param-{name}` of each of `headers`, in its order.
    params: Vec<HeaderName>,
}

impl ToolRoute {
    /// The route of the tool `name` whose schema asks for `headers`.
    pub fn new(name: &str, headers: ToolHeaders) -> Result<Self, Error> {
        let params = headers
            .headers()
            .iter()
            .map(|h| {
                let name = format!("{PARAM_PREFIX}{}", h.name);
                HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| Error::InvalidHeader { name: name.clone() })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            name: header_value(MCP_NAME, encode_value(name))?,
            headers,
            params,
        })
    }

    /// The routing of a call with these arguments: the tool's `Mcp-Name`, and an
    /// `Mcp-Param-*` header for each annotated argument present
    /// ([`ToolHeaders::derive`]'s rules). An argument no header can carry is
    /// [`Error::Malformed`].
    pub fn routing(&self, arguments: Option<&Map<String, Value>>) -> Result<Routing, Error> {
        if self.params.is_empty() {
            return Ok(Routing {
                name: Some(self.name.clone()),
                params: Vec::new(),
                silence: None,
            });
        }
        let params = self
            .headers
            .values(arguments)
            .map(|derived| {
                let (index, value) = derived.map_err(Error::Malformed)?;
                let name = &self.params[index];
                Ok((name.clone(), header_value(name.as_str(), value)?))
            })
            .collect::<Result<_, Error>>()?;
        Ok(Routing {
            name: Some(self.name.clone()),
            params,
            silence: None,
        })
    }
}

/// An encoded header value, made typed.
fn header_value(name: &str, value: Cow<'_, str>) -> Result<HeaderValue, Error> {
    let invalid = || Error::InvalidHeader { name: name.into() };
    match value {
        Cow::Borrowed(text) => HeaderValue::from_str(text).map_err(|_| invalid()),
        Cow::Owned(text) => {
            HeaderValue::from_maybe_shared(Bytes::from(text)).map_err(|_| invalid())
        }
    }
}

/// `MCP-Protocol-Version`: built at compile time for the revision this crate's era speaks.
fn revision_value(revision: Revision) -> HeaderValue {
    match revision {
        Revision::V2026_07_28 => const { HeaderValue::from_static(Revision::V2026_07_28.as_str()) },
        other => HeaderValue::from_static(other.as_str()),
    }
}

/// `Mcp-Method`: the methods a client sends are built at compile time; another method's
/// value is checked and copied.
fn method_value(method_name: &str) -> Result<HeaderValue, Error> {
    /// The value of a method constant, built at compile time.
    macro_rules! sent {
        ($($name:path),* $(,)?) => {
            match method_name {
                $($name => const { HeaderValue::from_static($name) },)*
                other => header_value(MCP_METHOD, Cow::Borrowed(other))?,
            }
        };
    }
    Ok(sent![
        method::TOOLS_CALL,
        method::TOOLS_LIST,
        method::RESOURCES_READ,
        method::PROMPTS_GET,
        method::SERVER_DISCOVER,
        method::SUBSCRIPTIONS_LISTEN,
        method::RESOURCES_LIST,
        method::RESOURCES_TEMPLATES_LIST,
        method::PROMPTS_LIST,
        method::COMPLETION_COMPLETE,
        method::EVENTS_POLL,
        method::PING,
    ])
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
        routing: &Routing,
    ) -> Result<Call<T>, Error> {
        let silence = routing.silence.unwrap_or(self.client.config().silence);
        let standard = [
            (names::PROTOCOL_VERSION, revision_value(self.revision)),
            (names::METHOD, method_value(method_name)?),
        ];
        let name = routing.name.clone().map(|value| (names::NAME, value));
        let headers = standard
            .into_iter()
            .chain(name)
            .chain(routing.params.iter().cloned());
        let request = self
            .client
            .request(Method::POST, Some(body), ACCEPT_POST, headers);
        let timer = pin!(tokio::time::sleep(silence));
        let mut silence = Silence::new(timer, silence);
        let response = self.client.send(request, &mut silence).await?;
        answer(&self.client, id, response, &mut silence, None).await
    }
}
