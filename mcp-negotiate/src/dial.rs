//! Dialing a server: the negotiation machine driven over the transport.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use mcp_transport::Error as TransportError;
use mcp_transport::driver::{
    ClientFeatures, Config, HttpClient, LegacyTransport, ModernTransport, Routing,
};
use mcp_transport::reply::Failure;
use mcp_wire::{
    ClientCapabilities, DiscoverResult, Implementation, InitializeParams, InitializeResult,
    ModernMeta, RenderedMeta, RequestId, RequestMeta, encode_notification,
    encode_request_with_meta, method,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tracing::Instrument;

use crate::ids::Ids;
use crate::{Connected, Failed, Negotiation, Progress, Reply, Start, Step};

/// What a connection does when the server loses its legacy session (a 404 to a request that
/// carried it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Recovery {
    /// Dial again at once, the way the connection first got there, and send the refused
    /// request again on the new session.
    #[default]
    AtOnce,
    /// Fail the request with the transport's `SessionLost` and leave the re-dial to the
    /// owner, on its own schedule ([`Client::redial`](crate::Client::redial)).
    ByOwner,
}

/// The transport a dial ended on, with what its requests must carry.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Link {
    /// 2025-11-25 and older: the session is held by the transport.
    Legacy(LegacyTransport),
    /// 2026-07-28: every request carries the rendered `_meta`.
    Modern {
        /// The transport.
        transport: ModernTransport,
        /// The three `_meta` keys, rendered once.
        meta: Arc<RenderedMeta>,
    },
}

/// A dialed, negotiated server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Dialed {
    /// What the negotiation agreed.
    pub connected: Connected,
    /// The transport to use.
    pub link: Link,
}

/// Dials one server: holds its HTTP client (one pool), what the client says about itself,
/// and how its connections behave; negotiates each time it is asked. Built by
/// [`ClientBuilder::dialer`](crate::ClientBuilder::dialer); cheap to clone.
#[derive(Debug, Clone)]
pub struct Dialer {
    client: HttpClient,
    info: Implementation,
    features: ClientFeatures,
    capabilities: ClientCapabilities,
    ids: Arc<Ids>,
    recovery: Recovery,
    list_tools: bool,
}

impl Dialer {
    /// A dialer of `url` over a transport configured by `config`, saying `info` and
    /// declaring exactly `features`. Fails when the URL or a configured header is refused.
    pub(crate) fn new(
        url: &str,
        config: Config,
        info: Implementation,
        features: ClientFeatures,
        recovery: Recovery,
        list_tools: bool,
    ) -> Result<Self, TransportError> {
        Ok(Self {
            client: HttpClient::new(url, config)?,
            info,
            capabilities: features.capabilities(),
            features,
            ids: Arc::default(),
            recovery,
            list_tools,
        })
    }

    /// How its connections recover a lost session.
    pub fn recovery(&self) -> Recovery {
        self.recovery
    }

    /// The connection's timeout: the transport's silence bound.
    pub fn timeout(&self) -> Duration {
        self.client.config().silence
    }

    /// How many of a server's requests its connections answer at once, and inputs in one
    /// `input_required` round.
    pub(crate) fn answering_max(&self) -> usize {
        self.client.config().answering_max
    }

    /// The next request id of this server's connections, in order: a dial's steps take
    /// theirs so (the probe 0, `initialize` 1); a call takes one from its thread's block of
    /// the same ids.
    pub fn next_id(&self) -> RequestId {
        RequestId::Number(self.ids.next())
    }

    /// An id for a call on one of this server's connections: unique as
    /// [`Dialer::next_id`]'s, taken without writing a counter every thread shares.
    pub(crate) fn call_id(&self) -> RequestId {
        RequestId::Number(self.ids.for_call())
    }

    /// What the client serves when the server asks, and what it does with the rest.
    pub fn features(&self) -> &ClientFeatures {
        &self.features
    }

    /// Whether connections list the tools at connect (when the server declares `tools`).
    pub(crate) fn lists_tools(&self) -> bool {
        self.list_tools
    }

    /// The capabilities the client declares.
    pub fn capabilities(&self) -> &ClientCapabilities {
        &self.capabilities
    }

    /// The client's `Implementation`, as sent.
    pub fn client_info(&self) -> &Implementation {
        &self.info
    }

    /// Dials and negotiates, starting as `start` says.
    pub async fn dial(&self, start: Start) -> Result<Dialed, Failed> {
        let endpoint = self.client.endpoint();
        // The endpoint without any userinfo it may carry.
        let host = endpoint.authority().map_or("", |a| a.as_str());
        let host = host.rsplit_once('@').map_or(host, |(_, host)| host);
        let span = tracing::debug_span!("mcp.dial", host, path = endpoint.path(), ?start);
        self.negotiate(start).instrument(span).await
    }

    async fn negotiate(&self, start: Start) -> Result<Dialed, Failed> {
        let mut negotiation = Negotiation::new(start);
        let legacy = LegacyTransport::new(self.client.clone(), self.features.clone());
        loop {
            let step = negotiation.step();
            tracing::debug!(?step, "negotiation step sent");
            let (reply, session) = match step {
                Step::Discover { revision } => (self.discover(revision).await, None),
                Step::Initialize { revision } => self.initialize(&legacy, revision).await,
            };
            tracing::debug!(?step, ?reply, "negotiation reply");
            match negotiation.on_reply(reply) {
                Progress::Send(_) => {}
                Progress::Connected(connected) => {
                    tracing::debug!(revision = %connected.revision, "negotiated");
                    return self.established(connected, legacy, session).await;
                }
                Progress::Failed(failed) => {
                    tracing::debug!(%failed, "negotiation refused");
                    return Err(failed);
                }
            }
        }
    }

    fn modern_meta(&self, revision: mcp_wire::Revision) -> RenderedMeta {
        ModernMeta {
            revision,
            client_info: &self.info,
            client_capabilities: &self.capabilities,
        }
        .render()
        .expect("an Implementation and capabilities always serialize")
    }

    async fn discover(&self, revision: mcp_wire::Revision) -> Reply {
        let meta = self.modern_meta(revision);
        let mut request_meta = RequestMeta::default();
        request_meta.modern = Some(&meta);
        let id = self.next_id();
        let body = encode(
            &id,
            method::SERVER_DISCOVER,
            &Map::<String, Value>::new(),
            &request_meta,
        );
        let transport = ModernTransport::new(self.client.clone(), revision);
        let call = transport
            .call::<DiscoverResult>(id, method::SERVER_DISCOVER, body, &Routing::default())
            .await;
        match call {
            Ok(call) => reply_of(call.response(|_| {}).await, Reply::Discovered),
            Err(e) => reply_of_error(e),
        }
    }

    async fn initialize(
        &self,
        legacy: &LegacyTransport,
        revision: mcp_wire::Revision,
    ) -> (Reply, Option<Vec<u8>>) {
        let params = InitializeParams::new(revision, self.capabilities.clone(), self.info.clone());
        let id = self.next_id();
        let body = encode(&id, method::INITIALIZE, &params, &RequestMeta::default());
        match legacy
            .call::<InitializeResult>(id, method::INITIALIZE, body, None)
            .await
        {
            Ok(posted) => (
                reply_of(posted.call.response(|_| {}).await, Reply::Initialized),
                posted.session_id,
            ),
            Err(e) => (reply_of_error(e), None),
        }
    }

    /// Finishes a connection: a legacy one records its session and sends
    /// `notifications/initialized`.
    async fn established(
        &self,
        connected: Connected,
        legacy: LegacyTransport,
        session: Option<Vec<u8>>,
    ) -> Result<Dialed, Failed> {
        let link = match connected.reached_by {
            Step::Discover { .. } => Link::Modern {
                transport: ModernTransport::new(self.client.clone(), connected.revision),
                meta: Arc::new(self.modern_meta(connected.revision)),
            },
            Step::Initialize { .. } => {
                let refused = |reply| Failed {
                    refusals: vec![crate::Refusal {
                        step: connected.reached_by,
                        reply,
                    }],
                };
                legacy
                    .established(connected.revision, session.as_deref())
                    .map_err(|e| refused(Reply::Unreadable(e.to_string())))?;
                let mut body = Vec::new();
                encode_notification(&mut body, method::notification::INITIALIZED, None::<&()>)
                    .expect("a notification without params encodes");
                legacy
                    .notify(method::notification::INITIALIZED, Bytes::from(body))
                    .await
                    .map_err(|e| refused(reply_of_error(e)))?;
                Link::Legacy(legacy)
            }
        };
        Ok(Dialed { connected, link })
    }
}

fn encode<P: Serialize>(id: &RequestId, method: &str, params: &P, meta: &RequestMeta) -> Bytes {
    let mut body = Vec::with_capacity(256);
    encode_request_with_meta(&mut body, id, method, params, meta)
        .expect("params of the crate's types encode");
    Bytes::from(body)
}

/// What a call's answer means to the negotiation.
fn reply_of<T: DeserializeOwned>(
    answer: Result<mcp_wire::TypedResponse<T>, TransportError>,
    ok: impl FnOnce(T) -> Reply,
) -> Reply {
    match answer {
        Ok(response) => match response.outcome {
            Ok(result) => ok(result),
            Err(error) => Reply::RpcError(error),
        },
        Err(e) => reply_of_error(e),
    }
}

fn reply_of_error(e: TransportError) -> Reply {
    match e {
        TransportError::Reply(Failure::Status {
            status,
            www_authenticate,
        }) => Reply::Status {
            status,
            www_authenticate,
        },
        TransportError::Reply(Failure::Unexpected { status: 202 }) => Reply::Accepted,
        TransportError::Silent { .. } => Reply::Silent,
        TransportError::Unreachable { detail } => Reply::Unreachable(detail),
        other => Reply::Unreadable(other.to_string()),
    }
}
