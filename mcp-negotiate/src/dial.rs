//! Dialing a server: the negotiation machine driven over the transport.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use mcp_transport::Error as TransportError;
use mcp_transport::driver::{
    Config, Elicitor, HttpClient, LegacyTransport, ModernTransport, Routing,
};
use mcp_transport::reply::Failure;
use mcp_wire::{
    ClientCapabilities, DiscoverResult, ElicitAction, ElicitRequestParams, ElicitResult,
    Implementation, InitializeParams, InitializeResult, ModernMeta, RenderedMeta, RequestId,
    RequestMeta, WithMeta, encode_notification, encode_request, method,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::{Connected, Failed, Negotiation, Progress, Reply, Start, Step};

/// The fixed timeout of a turn worker's or subagent's connection.
pub const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a person has to answer a server's question; then the answer is cancel.
pub const ELICITATION_TIMEOUT: Duration = Duration::from_secs(300);

/// Who dials: the supervisor, or a turn worker or subagent. They say different things about
/// themselves (the reference's "What agentd says about itself").
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Kind {
    /// The supervisor's connection: `clientInfo` with the instance as `title`, no
    /// capabilities, the configured timeout.
    Supervisor {
        /// The instance's name.
        instance: String,
    },
    /// A turn worker's or subagent's: `clientInfo` without a title, the elicitation
    /// capability (answered by `elicitor`), and a fixed 60 s timeout.
    Worker {
        /// Who answers the server's questions.
        elicitor: Arc<dyn Elicitor>,
    },
}

/// What a connection does when the server loses its legacy session (a 404 to a request that
/// carried it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Recovery {
    /// Dial again at once, the way the connection first got there, and send the refused
    /// request again on the new session (a turn worker's or subagent's connection).
    #[default]
    AtOnce,
    /// Fail the request with the transport's `SessionLost` and leave the re-dial to the
    /// owner, on its own schedule ([`Connection::redial`](crate::Connection::redial)): the
    /// supervisor's connections.
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

/// Dials one server: builds its HTTP client once, then negotiates each time it is asked.
#[derive(Debug, Clone)]
pub struct Dialer {
    client: HttpClient,
    info: Implementation,
    capabilities: ClientCapabilities,
    elicitor: Option<Arc<dyn Elicitor>>,
    ids: Arc<AtomicI64>,
    recovery: Recovery,
}

impl Dialer {
    /// A dialer of `url` for `kind`, over a transport configured by `config` (a worker's
    /// silence bound is [`CHILD_TIMEOUT`] whatever `config` says). Fails when the URL or a
    /// configured header is refused.
    pub fn new(url: &str, mut config: Config, kind: Kind) -> Result<Self, TransportError> {
        let mut info = Implementation::new("agentd", env!("CARGO_PKG_VERSION"));
        let (capabilities, elicitor) = match kind {
            Kind::Supervisor { instance } => {
                info.title = Some(instance);
                (ClientCapabilities::none(), None)
            }
            Kind::Worker { elicitor } => {
                config.silence = CHILD_TIMEOUT;
                let patient: Arc<dyn Elicitor> = Arc::new(Patient(elicitor));
                (ClientCapabilities::none().with_elicitation(), Some(patient))
            }
        };
        Ok(Self {
            client: HttpClient::new(url, config)?,
            info,
            capabilities,
            elicitor,
            ids: Arc::new(AtomicI64::new(0)),
            recovery: Recovery::AtOnce,
        })
    }

    /// The same dialer, its connections recovering a lost session as `recovery` says
    /// (by default [`Recovery::AtOnce`]).
    pub fn with_recovery(mut self, recovery: Recovery) -> Self {
        self.recovery = recovery;
        self
    }

    /// How its connections recover a lost session.
    pub fn recovery(&self) -> Recovery {
        self.recovery
    }

    /// The connection's timeout: the transport's silence bound.
    pub fn timeout(&self) -> Duration {
        self.client.config().silence
    }

    /// The next request id of this server's connections.
    pub fn next_id(&self) -> RequestId {
        RequestId::Number(self.ids.fetch_add(1, Ordering::Relaxed))
    }

    /// Who answers the server's questions (a worker's), bounded by [`ELICITATION_TIMEOUT`].
    pub(crate) fn elicitor(&self) -> Option<Arc<dyn Elicitor>> {
        self.elicitor.clone()
    }

    /// The client's `Implementation`, as sent.
    pub fn client_info(&self) -> &Implementation {
        &self.info
    }

    /// Dials and negotiates, starting as `start` says.
    pub async fn dial(&self, start: Start) -> Result<Dialed, Failed> {
        let mut negotiation = Negotiation::new(start);
        let legacy = LegacyTransport::new(self.client.clone(), self.elicitor.clone());
        loop {
            let step = negotiation.step();
            let (reply, session) = match step {
                Step::Discover { revision } => (self.discover(revision).await, None),
                Step::Initialize { revision } => self.initialize(&legacy, revision).await,
            };
            match negotiation.on_reply(reply) {
                Progress::Send(_) => {}
                Progress::Connected(connected) => {
                    return self.established(connected, legacy, session).await;
                }
                Progress::Failed(failed) => return Err(failed),
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
        let params = WithMeta {
            params: &Map::<String, Value>::new(),
            meta: request_meta,
        };
        let id = self.next_id();
        let body = encode(&id, method::SERVER_DISCOVER, &params);
        let transport = ModernTransport::new(self.client.clone(), revision);
        let call = transport
            .call::<DiscoverResult>(id, method::SERVER_DISCOVER, body, Routing::default())
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
        let body = encode(&id, method::INITIALIZE, &params);
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

fn encode<P: Serialize>(id: &RequestId, method: &str, params: &P) -> Bytes {
    let mut body = Vec::with_capacity(256);
    encode_request(&mut body, id, method, Some(params))
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

/// An elicitation handler given at most [`ELICITATION_TIMEOUT`]: then the answer is cancel.
#[derive(Debug)]
struct Patient(Arc<dyn Elicitor>);

impl Elicitor for Patient {
    fn elicit(
        &self,
        params: ElicitRequestParams,
    ) -> Pin<Box<dyn Future<Output = ElicitResult> + Send + '_>> {
        Box::pin(async move {
            tokio::time::timeout(ELICITATION_TIMEOUT, self.0.elicit(params))
                .await
                .unwrap_or_else(|_| ElicitResult::new(ElicitAction::Cancel))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A person who never answers.
    #[derive(Debug)]
    struct Silent;

    impl Elicitor for Silent {
        fn elicit(
            &self,
            _: ElicitRequestParams,
        ) -> Pin<Box<dyn Future<Output = ElicitResult> + Send + '_>> {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_person_has_300_seconds_then_the_answer_is_cancel() {
        let params: ElicitRequestParams = serde_json::from_value(serde_json::json!({
            "message": "Name?", "requestedSchema": {"type": "object"}
        }))
        .unwrap();
        let started = tokio::time::Instant::now();
        let answer = Patient(Arc::new(Silent)).elicit(params).await;
        assert_eq!(answer.action, ElicitAction::Cancel);
        assert_eq!(started.elapsed(), ELICITATION_TIMEOUT);
    }

    #[test]
    fn a_worker_waits_60_seconds_whatever_the_config_says() {
        let mut config = Config::default();
        config.silence = Duration::from_secs(5);
        let url = "http://127.0.0.1:9/mcp";
        let supervisor = Kind::Supervisor {
            instance: "a".into(),
        };
        let worker = Kind::Worker {
            elicitor: Arc::new(Silent),
        };
        let supervised = Dialer::new(url, config.clone(), supervisor).unwrap();
        assert_eq!(supervised.timeout(), Duration::from_secs(5));
        assert_eq!(
            Dialer::new(url, config, worker).unwrap().timeout(),
            CHILD_TIMEOUT
        );
        assert_eq!(CHILD_TIMEOUT, Duration::from_secs(60));
    }
}
