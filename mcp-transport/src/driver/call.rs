//! One request's answer as it arrives: notifications first, then its response.

use std::fmt;
use std::future::{Future, poll_fn};
use std::marker::PhantomData;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::features::{Answer, ClientFeatures, Unserved};
use bytes::Bytes;
use http::Method;
use hyper::body::Incoming as Body;
use mcp_wire::{
    ErrorObject, Message, RawJson, RequestId, TypedMessage, TypedResponse, code, decode, decode_as,
    encode_error, encode_result, method,
};
use serde::de::DeserializeOwned;

use super::client::{HttpClient, Silence, next_chunk, typed};
use crate::Error;
use crate::headers::{ACCEPT_POST, ACCEPT_STREAM, LAST_EVENT_ID, MCP_SESSION_ID};
use crate::session::{Loss, Resume, Resumption, Session};
use crate::sse::Decoder;

/// A notification a server sent on a request's stream (progress, a log message, or on a
/// listen, a change).
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// The method.
    pub method: String,
    /// The params, verbatim.
    pub params: Option<RawJson>,
}

impl Notice {
    /// Decodes the params by the method, as [`mcp_wire::ServerNotification::decode`] does.
    pub fn decode(&self) -> Result<mcp_wire::ServerNotification, mcp_wire::Error> {
        mcp_wire::ServerNotification::decode(&mcp_wire::Notification {
            method: self.method.as_str().into(),
            params: self.params.as_ref().map(RawJson::as_raw),
        })
    }
}

/// The `notifications/cancelled` of request `id`, encoded; `None` if it cannot be.
fn cancelled(id: RequestId, reason: Option<String>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    let params = mcp_wire::CancelledParams::new(id, reason);
    mcp_wire::encode_notification(&mut body, method::notification::CANCELLED, Some(&params))
        .ok()
        .map(|()| body)
}

/// Whether `bytes` is `{}`, spaces aside.
fn is_empty_object(bytes: &[u8]) -> bool {
    let mut rest = bytes.iter().filter(|b| !b.is_ascii_whitespace());
    rest.next() == Some(&b'{') && rest.next() == Some(&b'}') && rest.next().is_none()
}

/// What a call yields.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery<T> {
    /// A notification before the response.
    Notification(Notice),
    /// The response; nothing follows it.
    Response(TypedResponse<T>),
}

/// What a legacy stream needs besides its bytes: the client to resume with and to post
/// answers to server requests, the session headers, and the client's features.
#[derive(Debug, Clone)]
pub(crate) struct Legacy {
    pub(crate) client: HttpClient,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) features: ClientFeatures,
    /// The session the stream rides, told of a 404 to a reopen.
    pub(crate) session: Arc<Mutex<Session>>,
}

impl Legacy {
    pub(crate) fn headers(&self) -> Vec<(&str, &str)> {
        self.headers.iter().map(|(k, v)| (*k, v.as_str())).collect()
    }

    /// Answers a server's request on a stream: `ping` with `{}`, a request a declared
    /// feature serves through [`ClientFeatures::answer`], anything else -32601 (or nothing,
    /// as [`ClientFeatures::unserved`] says). The answer is
    /// POSTed back, bounded by the answer timeout; a failed answer does not fail the stream
    /// it came on.
    async fn answer(self, id: RequestId, method_name: String, params: Option<RawJson>) {
        let mut body = Vec::new();
        let written = match method_name.as_str() {
            method::PING => encode_result(&mut body, &id, &serde_json::json!({})),
            other => match self.features.answer(other, params.as_ref()).await {
                Some(Answer::Elicitation(answer)) => encode_result(&mut body, &id, &answer),
                Some(Answer::Roots(answer)) => encode_result(&mut body, &id, &answer),
                Some(Answer::Invalid(error)) => encode_error(&mut body, Some(&id), &error),
                None if self.features.unserved() == Unserved::Drop => return,
                None => encode_error(
                    &mut body,
                    Some(&id),
                    &ErrorObject::new(
                        code::METHOD_NOT_FOUND,
                        format!("the client does not serve {other}"),
                    ),
                ),
            },
        };
        if written.is_err() {
            return;
        }
        self.post(body).await;
    }

    /// Answers a server's request it sent while [`Config::answering_max`] others are being
    /// answered on the same stream: refused, at once.
    ///
    /// [`Config::answering_max`]: super::Config::answering_max
    async fn refuse(self, id: RequestId) {
        let mut body = Vec::new();
        let busy = ErrorObject::new(
            code::INTERNAL_ERROR,
            "the client is answering too many requests of this stream",
        );
        if encode_error(&mut body, Some(&id), &busy).is_ok() {
            self.post(body).await;
        }
    }

    /// Sends `notifications/cancelled` of request `id` on a task of its own, bounded by the
    /// answer timeout.
    pub(crate) fn cancel(self, id: RequestId, reason: Option<String>) -> Option<JoinHandle<()>> {
        let body = cancelled(id, reason)?;
        Some(tokio::spawn(async move { self.post(body).await }))
    }

    /// POSTs a message of the client's (an answer, a cancellation), bounded by the answer
    /// timeout. Its fate does not change the stream's: a server that does not take it will
    /// say so on the stream, or fall silent and meet the silence bound.
    async fn post(&self, body: Vec<u8>) {
        let bound = self.client.config().answer_timeout;
        let _ = tokio::time::timeout(bound, async {
            let timer = pin!(tokio::time::sleep(bound));
            let request = self.client.request(
                Method::POST,
                Some(Bytes::from(body)),
                ACCEPT_POST,
                typed(&self.headers())?,
            );
            let response = self
                .client
                .send(request, &mut Silence::new(timer, bound))
                .await?;
            drop(response);
            Ok::<_, Error>(())
        })
        .await;
    }

    /// Reopens a stream with GET after its `retry`, carrying `Last-Event-ID` when known.
    async fn reopen(
        &self,
        last_event_id: Option<&str>,
        silence: Option<Duration>,
    ) -> Result<Body, Error> {
        let mut headers = self.headers();
        if let Some(id) = last_event_id {
            headers.push((LAST_EVENT_ID, id));
        }
        let bound = silence.unwrap_or(self.client.config().silence);
        let timer = pin!(tokio::time::sleep(bound));
        let request = self
            .client
            .request(Method::GET, None, ACCEPT_STREAM, typed(&headers)?);
        let response = self
            .client
            .send(request, &mut Silence::new(timer, bound))
            .await?;
        let sent = headers
            .iter()
            .find_map(|(k, v)| (*k == MCP_SESSION_ID).then_some(*v));
        let status = response.status().as_u16();
        let loss = self
            .session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .on_status(status, sent);
        match status {
            _ if loss != Loss::Kept => Err(Error::SessionLost),
            200..=299 => Ok(response.into_body()),
            status => Err(Error::Reply(crate::reply::Failure::Status {
                status,
                www_authenticate: None,
            })),
        }
    }
}

/// Where a call's messages come from.
enum Source {
    /// A JSON body: one message.
    Json(Option<Bytes>),
    /// An event stream.
    Stream {
        body: Body,
        /// Boxed: it holds the buffers of the event being built.
        decoder: Box<Decoder>,
        resume: Resumption,
    },
    /// The response was delivered, or the call failed.
    Done,
}

/// One request's answer, read as it arrives.
///
/// `next` yields each notification the server sends before the response, then the
/// response, then `None`. On a legacy stream, server requests are answered on the way
/// (`ping`, `elicitation/create` through the handler, anything else -32601), and a stream
/// that closes before its response is resumed with GET and `Last-Event-ID`. Each read waits
/// at most the silence bound, which restarts on every byte received; while an answer to a
/// server request is being made (a person answering an elicitation), the server waits on
/// the client and the bound does not run.
///
/// Dropping a call closes its stream: a 2026-07-28 server takes that as the cancellation. A
/// legacy call is cancelled with [`Call::cancel`].
pub struct Call<T> {
    id: RequestId,
    source: Source,
    silence: Option<Duration>,
    event_limit: usize,
    /// Boxed: most calls have none, and the call is kept small for the futures that hold it.
    legacy: Option<Box<Legacy>>,
    /// A GET stream waits for no response and is reopened whenever it closes.
    endless: bool,
    /// The last event id of a stream that is done.
    last_event_id: Option<String>,
    /// A reopen under way: when, and from which event id. Kept across a dropped `next`, so
    /// that the `retry` wait is not started again by every call.
    reopening: Option<(tokio::time::Instant, Option<String>)>,
    /// The answers to the server's requests still being made.
    answering: Answering,
    _result: PhantomData<fn() -> T>,
}

/// The answers a call's stream is making to its server's requests, each on a task of its
/// own: the stream is read on meanwhile, and a caller that stops reading (not the call)
/// does not lose them. Dropped, it stops them all: a person still being asked is asked no
/// more.
#[derive(Debug, Default)]
struct Answering {
    /// Requests a declared feature serves (a person asked, say): while one is answered, the
    /// server waits on the client, and its silence is not counted.
    served: Vec<JoinHandle<()>>,
    /// Quick replies: `ping`, -32601, and the refusals of requests past the bound.
    replies: Vec<JoinHandle<()>>,
}

impl Answering {
    /// Takes a server's request: served while fewer than `answering_max` are, else refused
    /// (-32603); `ping` and what no feature serves replied to as [`Legacy::answer`] says.
    /// Past `answering_max` replies under way, a request is left unanswered: a server that
    /// floods a stream gets no more of the client's posts.
    fn take(
        &mut self,
        legacy: &Legacy,
        id: RequestId,
        method_name: String,
        params: Option<RawJson>,
    ) {
        let max = legacy.client.config().answering_max;
        self.served.retain(|task| !task.is_finished());
        self.replies.retain(|task| !task.is_finished());
        let serves = legacy.features.serves(&method_name);
        if serves && self.served.len() < max {
            let answer = legacy.clone().answer(id, method_name, params);
            self.served.push(tokio::spawn(answer));
        } else if !serves
            && method_name != method::PING
            && legacy.features.unserved() == Unserved::Drop
        {
            // Nothing is sent for it.
        } else if self.replies.len() < max {
            let reply = match serves {
                true => tokio::spawn(legacy.clone().refuse(id)),
                false => tokio::spawn(legacy.clone().answer(id, method_name, params)),
            };
            self.replies.push(reply);
        } else {
            tracing::debug!(
                method = method_name,
                "a server request past the bound, unanswered"
            );
        }
    }

    /// An answer still being made to a request a feature serves.
    fn pending(&mut self) -> Option<&mut JoinHandle<()>> {
        self.served.retain(|task| !task.is_finished());
        self.served.first_mut()
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        for task in self.served.iter().chain(&self.replies) {
            task.abort();
        }
    }
}

impl<T> fmt::Debug for Call<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("id", &self.id)
            .field("done", &matches!(self.source, Source::Done))
            .finish_non_exhaustive()
    }
}

impl<T: DeserializeOwned> Call<T> {
    pub(crate) fn json(id: RequestId, body: Bytes) -> Self {
        Self::new(id, Source::Json(Some(body)), None, 0, None)
    }

    pub(crate) fn stream(
        id: RequestId,
        body: Body,
        silence: Option<Duration>,
        event_limit: usize,
        legacy: Option<Box<Legacy>>,
    ) -> Self {
        let source = Source::Stream {
            body,
            decoder: Box::new(Decoder::new(event_limit)),
            resume: Resumption::new(),
        };
        Self::new(id, source, silence, event_limit, legacy)
    }

    pub(crate) fn endless(mut self) -> Self {
        self.endless = true;
        self
    }

    fn new(
        id: RequestId,
        source: Source,
        silence: Option<Duration>,
        event_limit: usize,
        legacy: Option<Box<Legacy>>,
    ) -> Self {
        Self {
            id,
            source,
            silence,
            event_limit,
            legacy,
            endless: false,
            last_event_id: None,
            reopening: None,
            answering: Answering::default(),
            _result: PhantomData,
        }
    }

    /// The id of the request.
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// The last event id the call's stream carried, if any: where a legacy stream would
    /// resume from.
    pub fn last_event_id(&self) -> Option<&str> {
        match &self.source {
            Source::Stream { resume, .. } => resume.last_event_id(),
            _ => self.last_event_id.as_deref(),
        }
    }

    /// The next notification, or the response; `None` once the response was delivered.
    pub async fn next(&mut self) -> Result<Option<Delivery<T>>, Error> {
        let outcome = self.read().await;
        if matches!(outcome, Err(_) | Ok(Some(Delivery::Response(_)))) {
            if let Source::Stream { resume, .. } = &self.source {
                self.last_event_id = resume.last_event_id().map(str::to_owned);
            }
            self.source = Source::Done;
        }
        outcome
    }

    /// Reads until the response, passing notifications to `on_notice`.
    pub async fn response(
        mut self,
        mut on_notice: impl FnMut(Notice),
    ) -> Result<TypedResponse<T>, Error> {
        if let Source::Json(_) = self.source {
            // A JSON answer is its one message, read at once.
            let delivery = self.json_message()?;
            return Self::response_of(delivery, &mut on_notice).unwrap_or(Err(Error::Ended));
        }
        // Boxed: a stream's reading is kept out of the future of every JSON answer.
        Box::pin(async move {
            loop {
                if let Some(response) = Self::response_of(self.next().await?, &mut on_notice) {
                    return response;
                }
            }
        })
        .await
    }

    /// The response a delivery is, if it is one; a notification goes to `on_notice`.
    fn response_of(
        delivery: Option<Delivery<T>>,
        on_notice: &mut impl FnMut(Notice),
    ) -> Option<Result<TypedResponse<T>, Error>> {
        match delivery {
            Some(Delivery::Notification(n)) => {
                on_notice(n);
                None
            }
            Some(Delivery::Response(r)) => Some(Ok(r)),
            None => Some(Err(Error::Ended)),
        }
    }

    /// Cancels the request: its answers to the server's requests stop (a person asked is
    /// asked no more), then a legacy server is sent `notifications/cancelled`, on a task of
    /// its own bounded by the answer timeout, which is returned; a modern one sees its
    /// stream close.
    pub fn cancel(self, reason: Option<String>) -> Option<JoinHandle<()>> {
        let legacy = Legacy::clone(self.legacy.as_deref()?);
        if self.endless || matches!(self.source, Source::Done) {
            return None;
        }
        let id = self.id.clone();
        drop(self);
        legacy.cancel(id, reason)
    }

    async fn read(&mut self) -> Result<Option<Delivery<T>>, Error> {
        loop {
            match &mut self.source {
                Source::Done => return Ok(None),
                Source::Json(_) => return self.json_message(),
                Source::Stream {
                    body,
                    decoder,
                    resume,
                } => {
                    if let Some(event) = decoder.next_event() {
                        let event = event?;
                        resume.observe(event);
                        if !event.is_message() {
                            continue;
                        }
                        let bytes = event.data.as_bytes();
                        let legacy = self.legacy.as_deref();
                        let answering = &mut self.answering;
                        let handled =
                            Self::handle(&self.id, self.endless, legacy, answering, bytes)?;
                        if let Some(delivery) = handled {
                            return Ok(Some(delivery));
                        }
                        continue;
                    }
                    let chunk = match self.answering.pending() {
                        // Unbounded until the answer is sent; then bounded afresh.
                        Some(answer) => {
                            let mut chunk = pin!(next_chunk(body, None));
                            let read = poll_fn(|cx| match chunk.as_mut().poll(cx) {
                                Poll::Ready(chunk) => Poll::Ready(Some(chunk)),
                                Poll::Pending => Pin::new(&mut *answer).poll(cx).map(|_| None),
                            });
                            match read.await {
                                Some(chunk) => chunk?,
                                None => continue,
                            }
                        }
                        None => next_chunk(body, self.silence).await?,
                    };
                    match chunk {
                        Some(bytes) => decoder.push(&bytes),
                        // Boxed: a rare path, kept out of every read's future.
                        None => Box::pin(self.reopen()).await?,
                    }
                }
            }
        }
    }

    /// The message of a JSON answer, once; `None` after it.
    fn json_message(&mut self) -> Result<Option<Delivery<T>>, Error> {
        let Source::Json(body) = &mut self.source else {
            return Ok(None);
        };
        let Some(body) = body.take() else {
            return Ok(None);
        };
        let legacy = self.legacy.as_deref();
        match Self::handle(&self.id, self.endless, legacy, &mut self.answering, &body)? {
            Some(delivery) => Ok(Some(delivery)),
            None => Err(Error::Malformed(mcp_wire::Error::Shape {
                detail: "a JSON answer that is not the response".into(),
            })),
        }
    }

    /// The stream ended before its response: resume a legacy one, fail otherwise.
    async fn reopen(&mut self) -> Result<(), Error> {
        let (Some(legacy), Source::Stream { resume, .. }) = (&self.legacy, &self.source) else {
            return Err(Error::Ended);
        };
        let (at, last) = match &self.reopening {
            Some(reopening) => reopening.clone(),
            None => {
                let now = tokio::time::Instant::now();
                let (at, last) = match resume.on_close(now.into_std()) {
                    Resume::At { at, last_event_id } => (at.into(), Some(last_event_id)),
                    // A server-push stream without ids starts again from now.
                    _ if self.endless => (now + resume.retry(), None),
                    _ => return Err(Error::Ended),
                };
                tracing::debug!(last_event_id = ?last, "the stream closed early: resuming it");
                self.reopening = Some((at, last.clone()));
                (at, last)
            }
        };
        tokio::time::sleep_until(at).await;
        let reopened = legacy.reopen(last.as_deref(), self.silence).await;
        self.reopening = None;
        let body = reopened?;
        if let Source::Stream {
            body: old, decoder, ..
        } = &mut self.source
        {
            *old = body;
            **decoder = Decoder::new(self.event_limit);
        }
        Ok(())
    }

    /// Decodes one message of the answer: the response to this request ends the call, a
    /// notification is handed over, a server request is answered, and anything else (a
    /// replayed `{}`, another request's response replayed by a legacy server) is passed over.
    ///
    /// A function of the call's fields it needs rather than a method: an event is lent by
    /// the decoder, which the call holds.
    fn handle(
        id: &RequestId,
        endless: bool,
        legacy: Option<&Legacy>,
        answering: &mut Answering,
        bytes: &[u8],
    ) -> Result<Option<Delivery<T>>, Error> {
        // Bodies and events are bounded already, where they are read.
        let limit = usize::MAX;
        let is_ours = |of: Option<&RequestId>| !endless && of.is_none_or(|of| of == id);
        match decode_as::<T>(bytes, limit) {
            Ok(TypedMessage::Response(r)) if is_ours(r.id.as_ref()) => {
                Ok(Some(Delivery::Response(r)))
            }
            Ok(TypedMessage::Response(_)) => Ok(None),
            Ok(TypedMessage::Notification(n)) => Ok(Some(Delivery::Notification(Notice {
                method: n.method.into_owned(),
                params: n.params.map(RawJson::from),
            }))),
            Ok(TypedMessage::Request(r)) => {
                if let Some(legacy) = legacy {
                    let params = r.params.map(RawJson::from);
                    answering.take(legacy, r.id, r.method.into_owned(), params);
                }
                Ok(None)
            }
            // A priming event replayed as `data: {}` carries nothing.
            Err(_) if is_empty_object(bytes) => Ok(None),
            // A result that does not fit `T` may be another request's, replayed: look at the
            // id before calling it malformed.
            Err(e @ mcp_wire::Error::Shape { .. }) => match decode(bytes, limit) {
                Ok(Message::Response(r)) if !is_ours(r.id.as_ref()) => Ok(None),
                _ => Err(Error::Malformed(e)),
            },
            Err(e) => Err(Error::Malformed(e)),
        }
    }
}
