//! The 2025-11-25 (and older) transport: a session, the GET stream, server requests, and
//! resumption.

use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method};
use mcp_wire::{RequestId, Revision, method};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use super::call::{Call, Legacy};
use super::client::{HttpClient, Silence, read_body, typed};
use super::features::ClientFeatures;
use crate::Error;
use crate::headers::{ACCEPT_POST, ACCEPT_STREAM, LAST_EVENT_ID, MCP_SESSION_ID};
use crate::reply::{Answer, Failure, Head};
use crate::session::{Loss, Session};

/// A legacy connection's transport: every request carries the session the `initialize`
/// answer gave, and `MCP-Protocol-Version` after the handshake.
///
/// The handshake itself belongs to the layer above: it sends `initialize` with
/// [`LegacyTransport::call`], reads the result, and records it with
/// [`LegacyTransport::established`] (the session id comes from [`Posted::session_id`]).
#[derive(Debug, Clone)]
pub struct LegacyTransport {
    client: HttpClient,
    session: Arc<Mutex<Session>>,
    features: ClientFeatures,
}

/// A request's answer, with the session id its head carried.
#[derive(Debug)]
pub struct Posted<T> {
    /// The answer, as it arrives.
    pub call: Call<T>,
    /// The `Mcp-Session-Id` of the answer (the `initialize` answer gives the session).
    pub session_id: Option<Vec<u8>>,
}

impl LegacyTransport {
    /// A transport over `client`; `features` answer the server's requests on its streams
    /// (a request no feature serves is answered -32601).
    pub fn new(client: HttpClient, features: ClientFeatures) -> Self {
        Self {
            client,
            session: Arc::new(Mutex::new(Session::new())),
            features,
        }
    }

    fn session(&self) -> std::sync::MutexGuard<'_, Session> {
        self.session.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session as it stands.
    pub fn snapshot(&self) -> Session {
        self.session().clone()
    }

    /// Records the `initialize` answer: the revision agreed and the session id, if any.
    pub fn established(&self, revision: Revision, session_id: Option<&[u8]>) -> Result<(), Error> {
        self.session().initialized(revision, session_id)
    }

    /// The session's headers and features for a request of `method_name` (boxed, as a call
    /// holds them), and the session id it carries; refused once the client ended the
    /// session, except for `initialize`.
    fn legacy(&self, method_name: &str) -> Result<(Box<Legacy>, Option<String>), Error> {
        let session = self.session();
        if !session.allows(method_name) {
            return Err(Error::SessionLost);
        }
        let headers = session
            .headers(method_name)
            .into_iter()
            .map(|(k, v)| (k, v.to_owned()))
            .collect();
        let sent = match method_name {
            method::INITIALIZE => None,
            _ => session.id().map(str::to_owned),
        };
        let legacy = Box::new(Legacy {
            client: self.client.clone(),
            headers,
            features: self.features.clone(),
            session: self.session.clone(),
        });
        Ok((legacy, sent))
    }

    /// Sends one HTTP request on the session (a POST of `body`, or a GET from
    /// `last_event_id`) and reads the head of its answer: a 404 to a request that carried
    /// the session is [`Error::SessionLost`].
    async fn exchange(
        &self,
        http: Method,
        method_name: &str,
        body: Option<Bytes>,
        last_event_id: Option<&str>,
        silence: &mut Silence<'_>,
    ) -> Result<(Box<Legacy>, http::Response<hyper::body::Incoming>), Error> {
        let (legacy, sent) = self.legacy(method_name)?;
        let mut headers = legacy.headers();
        if let Some(id) = last_event_id {
            headers.push((LAST_EVENT_ID, id));
        }
        let accept = match body {
            Some(_) => ACCEPT_POST,
            None => ACCEPT_STREAM,
        };
        let request = self.client.request(http, body, accept, typed(&headers)?);
        let response = self.client.send(request, silence).await?;
        let status = response.status().as_u16();
        // A 404 to a request that carried a session, current or already replaced, means the
        // request was not served: both are `Error::SessionLost`.
        if self.session().on_status(status, sent.as_deref()) != Loss::Kept {
            tracing::debug!(method = method_name, "the server lost the session (404)");
            return Err(Error::SessionLost);
        }
        drop(headers);
        Ok((legacy, response))
    }

    /// Sends a request (the encoded message in `body`) and returns its answer as it comes.
    /// `silence` bounds each wait (the transport's configured bound when `None`).
    pub async fn call<T: DeserializeOwned>(
        &self,
        id: RequestId,
        method_name: &str,
        body: Bytes,
        silence: Option<Duration>,
    ) -> Result<Posted<T>, Error> {
        let bound = silence.unwrap_or(self.client.config().silence);
        let timer = pin!(tokio::time::sleep(bound));
        let mut silence = Silence::new(timer, bound);
        let (legacy, response) = self
            .exchange(Method::POST, method_name, Some(body), None, &mut silence)
            .await?;
        let session_id = response
            .headers()
            .get(MCP_SESSION_ID)
            .map(|v| v.as_bytes().to_vec());
        let call = answer(&self.client, id, response, &mut silence, Some(legacy)).await?;
        Ok(Posted { call, session_id })
    }

    /// Sends a notification; the server answers 202.
    pub async fn notify(&self, method_name: &str, body: Bytes) -> Result<(), Error> {
        let bound = self.client.config().silence;
        let timer = pin!(tokio::time::sleep(bound));
        let mut silence = Silence::new(timer, bound);
        let (_, response) = self
            .exchange(Method::POST, method_name, Some(body), None, &mut silence)
            .await?;
        accepted(&self.client, response, &mut silence).await
    }

    /// Cancels request `id`, sent on this session and not yet answered (its answer's head
    /// not even read): `notifications/cancelled`, sent on a task of its own bounded by the
    /// answer timeout, which is returned (`None` once the session is closed). Whether the
    /// server took it is not known.
    pub fn cancel(&self, id: RequestId, reason: Option<String>) -> Option<JoinHandle<()>> {
        let (legacy, _) = self.legacy(method::notification::CANCELLED).ok()?;
        legacy.cancel(id, reason)
    }

    /// Opens the GET stream a server pushes on (notifications and requests unrelated to any
    /// call). `None` when the server offers none (405). The stream has no silence bound and
    /// is reopened, after `retry`, whenever the server closes it.
    pub async fn server_stream(&self) -> Result<Option<Call<()>>, Error> {
        self.server_stream_after(None).await
    }

    /// As [`LegacyTransport::server_stream`], resuming after an event id seen before (on any
    /// stream of the session, see [`Call::last_event_id`]): the server replays what followed.
    pub async fn server_stream_after(
        &self,
        last_event_id: Option<&str>,
    ) -> Result<Option<Call<()>>, Error> {
        let bound = self.client.config().silence;
        let timer = pin!(tokio::time::sleep(bound));
        let mut silence = Silence::new(timer, bound);
        let (legacy, response) = self
            .exchange(Method::GET, method::PING, None, last_event_id, &mut silence)
            .await?;
        let status = response.status().as_u16();
        if status == 405 {
            return Ok(None);
        }
        let limits = self.client.config().limits;
        match Head::of(status, content_type(response.headers()), &limits) {
            Ok(Head::Stream) => Ok(Some(
                Call::stream(
                    RequestId::Number(-1),
                    response.into_body(),
                    None,
                    limits.sse_event,
                    Some(legacy),
                )
                .endless(),
            )),
            Ok(_) => Err(Error::Reply(Failure::Status {
                status,
                www_authenticate: None,
            })),
            Err(failure) => Err(Error::Reply(failure)),
        }
    }

    /// Ends the session: a DELETE with its id, when there is one (a 405 means the server
    /// does not let clients end sessions, which is no error). Later requests other than
    /// `initialize` fail with [`Error::SessionLost`] without being sent.
    pub async fn close(&self) -> Result<(), Error> {
        // Closing twice, or a session never made, sends nothing.
        let Ok((legacy, _)) = self.legacy(method::PING) else {
            return Ok(());
        };
        let Some(_) = self.session().close() else {
            return Ok(());
        };
        let bound = self.client.config().answer_timeout;
        let timer = pin!(tokio::time::sleep(bound));
        let mut silence = Silence::new(timer, bound);
        let request =
            self.client
                .request(Method::DELETE, None, ACCEPT_POST, typed(&legacy.headers())?);
        self.client.send(request, &mut silence).await.map(drop)
    }
}

pub(crate) fn content_type(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
}

/// Reads an answer's head and body into a [`Call`].
pub(crate) async fn answer<T: DeserializeOwned>(
    client: &HttpClient,
    id: RequestId,
    response: http::Response<hyper::body::Incoming>,
    silence: &mut Silence<'_>,
    legacy: Option<Box<Legacy>>,
) -> Result<Call<T>, Error> {
    let limits = client.config().limits;
    let status = response.status().as_u16();
    let head = Head::of(status, content_type(response.headers()), &limits).map_err(Error::Reply)?;
    // Only a refusal's is read (a 401's challenge): a success's head is not searched for it.
    let www_authenticate = match head {
        Head::Error { .. } => response
            .headers()
            .get(http::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        _ => None,
    };
    let mut body = response.into_body();
    match head {
        Head::Stream => Ok(Call::stream(
            id,
            body,
            Some(silence.bound()),
            limits.sse_event,
            legacy,
        )),
        Head::Accepted => Err(Error::Reply(Failure::Unexpected { status })),
        // A 2xx JSON body is the response: the call decodes it once, into its type.
        Head::Json { limit, .. } => {
            let bytes = read_body(&mut body, limit, silence).await?;
            match bytes.len() > limit {
                true => Err(Error::Reply(Failure::TooLarge { status, limit })),
                false => Ok(Call::json(id, bytes)),
            }
        }
        Head::Error { limit, .. } => {
            let bytes = read_body(&mut body, limit, silence).await?;
            match head.answer(&bytes, www_authenticate.as_deref()) {
                Answer::Message { .. } => Ok(Call::json(id, bytes)),
                Answer::Failure(failure) => Err(Error::Reply(failure)),
                Answer::Accepted => Err(Error::Reply(Failure::Unexpected { status })),
            }
        }
    }
}

/// Reads the answer to a notification: 202 (or another 2xx) is accepted.
pub(crate) async fn accepted(
    client: &HttpClient,
    response: http::Response<hyper::body::Incoming>,
    silence: &mut Silence<'_>,
) -> Result<(), Error> {
    let limits = client.config().limits;
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        return Ok(());
    }
    let head = Head::of(status, content_type(response.headers()), &limits).map_err(Error::Reply)?;
    let mut body = response.into_body();
    let bytes = match head.body_limit() {
        Some(limit) => read_body(&mut body, limit, silence).await?,
        None => Bytes::new(),
    };
    match head.answer(&bytes, None) {
        Answer::Failure(failure) => Err(Error::Reply(failure)),
        _ => Err(Error::Reply(Failure::Status {
            status,
            www_authenticate: None,
        })),
    }
}
