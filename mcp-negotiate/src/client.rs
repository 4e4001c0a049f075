//! The revision-neutral connection: one server, negotiated, used the same way whichever
//! revision it speaks.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;

use arc_swap::ArcSwap;
use bytes::Bytes;
use mcp_transport::Error as TransportError;
use mcp_transport::driver::{Answer, Delivery, Notice, Routing, ToolRoute};
use mcp_wire::{
    CallToolParams, CallToolResult, CompleteParams, CompleteResult, Cursor, ElicitAction,
    ElicitResult, ErrorObject, GetPromptParams, GetPromptResult, InputRequired, InputResponse,
    InputResponses, InvalidAnnotation, Meta, Outcome, Page, PageItem, PageParams, Prompt,
    ReadResourceParams, ReadResourceResult, RenderedMeta, RequestMeta, Resource, ResourceTemplate,
    Revision, ServerCapabilities, Tool, ToolHeaders, TypedResponse, encode_request_with_meta,
    method,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::Mutex;

use crate::{Dialed, Dialer, Failed, Link, Recovery, Start, Step};

/// How many `input_required` rounds one request may take before the connection gives up.
pub const MAX_INPUT_ROUNDS: usize = 16;

/// What can go wrong on a connection.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// The server could not be (re-)negotiated.
    Negotiation(Failed),
    /// The transport failed.
    Transport(mcp_transport::Error),
    /// The server answered the request with a JSON-RPC error: a protocol fault, not a tool
    /// that ran and failed (that is a result with `isError`).
    Rpc(ErrorObject),
    /// The server asked for input the client cannot give (a kind it did not declare, or
    /// input for a `resources/read`).
    Unanswerable {
        /// The method of the input request, or of the request itself.
        method: String,
    },
    /// The server asked for input in each of [`MAX_INPUT_ROUNDS`] rounds.
    TooManyRounds,
    /// One `input_required` round asked for more inputs than the client answers at once
    /// (the transport's `Config::answering_max`): none is asked.
    TooManyInputs {
        /// How many the round asked for.
        asked: usize,
        /// How many the client answers in one round.
        max: usize,
    },
    /// The caller cancelled the request: a 2026-07-28 server saw its stream close, a legacy
    /// one was sent `notifications/cancelled`.
    Cancelled,
    /// The tool was left out of the listing for an invalid `x-mcp-header` annotation: it is
    /// not called.
    ToolDropped(DroppedTool),
    /// A tool's arguments were not a JSON object.
    Arguments,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Negotiation(failed) => write!(f, "{failed}"),
            Self::Transport(e) => write!(f, "{e}"),
            Self::Rpc(e) => write!(f, "server error: {e}"),
            Self::Unanswerable { method } => write!(
                f,
                "the server asks for {method}, which the client cannot answer"
            ),
            Self::Cancelled => f.write_str("cancelled"),
            Self::ToolDropped(d) => write!(
                f,
                "tool {} was left out of the listing: {}",
                d.tool, d.reason
            ),
            Self::Arguments => f.write_str("tool arguments must be a JSON object"),
            Self::TooManyRounds => write!(
                f,
                "the server asked for input in each of {MAX_INPUT_ROUNDS} rounds"
            ),
            Self::TooManyInputs { asked, max } => write!(
                f,
                "the server asked for {asked} inputs in one round; the client answers at most {max}"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Negotiation(failed) => Some(failed),
            Self::Transport(e) => Some(e),
            Self::Rpc(e) => Some(e),
            _ => None,
        }
    }
}

impl From<mcp_transport::Error> for Error {
    fn from(e: mcp_transport::Error) -> Self {
        Self::Transport(e)
    }
}

/// A tool the listing left out, and why.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DroppedTool {
    /// The tool's name.
    pub tool: String,
    /// Why it was dropped.
    pub reason: InvalidAnnotation,
}

/// A server's tools, with what calling each needs.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    tools: Vec<Tool>,
    /// How a call to each tool kept is routed (2026-07-28).
    routes: HashMap<String, ToolRoute>,
    dropped: Vec<DroppedTool>,
}

impl Catalog {
    /// The tools, in the server's order.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The tools left out for an invalid `x-mcp-header` annotation (2026-07-28 only).
    pub fn dropped(&self) -> &[DroppedTool] {
        &self.dropped
    }
}

/// The generation of the link a request used, so that one re-dial serves every request that
/// met the same lost session.
struct Current {
    dialed: Dialed,
    generation: u64,
}

/// A negotiated connection to one server.
///
/// Requests are the same in both eras. A 2026-07-28 request carries the `_meta` keys
/// rendered once at connect and its routing headers (with the `Mcp-Param-*` headers of the
/// tool from the listing made at connect); a legacy request rides its session.
///
/// A legacy session the server lost (404) is dialed again the way the connection first got
/// there, at once or by the owner as the dialer's [`Recovery`] says. At once, the request
/// that met the 404 (refused before the server read it) is sent again, once, on the new
/// session. Requests already accepted on the lost session are never sent again (they may
/// have run): they fail with the transport's `SessionLost`.
pub struct Client {
    dialer: Dialer,
    /// Read on every request without a lock; replaced at a re-dial.
    current: ArcSwap<Current>,
    redial: Mutex<()>,
    /// The session is lost and waits for its owner's re-dial ([`Recovery::ByOwner`]).
    lost: tokio::sync::watch::Sender<bool>,
    /// Read on every call without a lock; replaced at a listing.
    catalog: ArcSwap<Catalog>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let current = self.current();
        f.debug_struct("Client")
            .field("revision", &current.dialed.connected.revision)
            .field("generation", &current.generation)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Dials the server (probing first), negotiates, and lists its tools (every page) when
    /// the dialer lists tools and the server declares them.
    pub async fn connect(dialer: Dialer) -> Result<Self, Error> {
        Self::connect_with(dialer, Start::Probe).await
    }

    /// As [`Client::connect`], starting as `start` says: the way another connection to
    /// the same server got there.
    pub async fn connect_with(dialer: Dialer, start: Start) -> Result<Self, Error> {
        let dialed = dialer.dial(start).await.map_err(Error::Negotiation)?;
        let list_tools = dialer.lists_tools() && dialed.connected.capabilities.tools();
        let connection = Self {
            dialer,
            current: ArcSwap::from_pointee(Current {
                dialed,
                generation: 0,
            }),
            redial: Mutex::new(()),
            lost: tokio::sync::watch::Sender::new(false),
            catalog: ArcSwap::from_pointee(Catalog::default()),
        };
        if list_tools {
            connection.refresh_tools().await?;
        }
        Ok(connection)
    }

    fn current(&self) -> Arc<Current> {
        self.current.load_full()
    }

    /// Resolves once the legacy session is lost and waits for [`Client::redial`] (with
    /// [`Recovery::ByOwner`]; whichever request or stream met the 404). Cancel-safe.
    pub async fn session_lost(&self) {
        let mut lost = self.lost.subscribe();
        // The sender lives as long as `self`.
        let _ = lost.wait_for(|lost| *lost).await;
    }

    /// Records that the session was lost, for [`Client::session_lost`].
    pub(crate) fn mark_lost(&self) {
        if self.dialer.recovery() == Recovery::ByOwner {
            self.lost.send_replace(true);
        }
    }

    /// How the connection recovers a lost legacy session.
    pub fn recovery(&self) -> Recovery {
        self.dialer.recovery()
    }

    /// The connection's timeout (the transport's silence bound).
    pub fn timeout(&self) -> std::time::Duration {
        self.dialer.timeout()
    }

    /// The current link (it changes when a lost session is dialed again).
    pub(crate) fn link(&self) -> Link {
        self.current().dialed.link.clone()
    }

    /// Dials again after the server lost the legacy session, the way the connection first
    /// got there; nothing is sent when a request already did so. Requests accepted on the
    /// lost session are not sent again. A connection with [`Recovery::ByOwner`] waits for
    /// this call; the others make it themselves at the first 404.
    pub async fn redial(&self) -> Result<(), Error> {
        self.redial_from(self.current().generation).await
    }

    /// A fresh request id.
    pub(crate) fn next_id(&self) -> mcp_wire::RequestId {
        self.dialer.next_id()
    }

    /// Sends a request with plain params (and the era's `_meta`) and reads its result.
    pub(crate) async fn raw_request<P: Serialize, T: DeserializeOwned>(
        &self,
        method_name: &str,
        params: &P,
    ) -> Result<T, Error> {
        self.request(
            method_name,
            params,
            Target::default(),
            |_| {},
            &mut pin!(never()),
        )
        .await
    }

    /// Closes the connection: a legacy session is ended with DELETE (a modern connection has
    /// nothing to end). Later requests fail; a re-dial makes a new connection.
    pub async fn close(&self) -> Result<(), Error> {
        match self.link() {
            Link::Legacy(transport) => Ok(transport.close().await?),
            Link::Modern { .. } => Ok(()),
        }
    }

    /// The request that reached the server (at the last re-dial, if any): a connection that
    /// follows this one starts the same way, [`Start::Like`] it.
    pub fn reached_by(&self) -> Step {
        self.current().dialed.connected.reached_by
    }

    /// The revision agreed.
    pub fn revision(&self) -> Revision {
        self.current.load().dialed.connected.revision
    }

    /// The server's capabilities.
    pub fn capabilities(&self) -> ServerCapabilities {
        self.current().dialed.connected.capabilities.clone()
    }

    /// The tool catalogue made at connect (or at the last [`Client::refresh_tools`]).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.load_full()
    }

    /// Lists the tools again, every page, and keeps the result as the catalogue. Unlike the
    /// listing at connect, it asks whether or not the server declared `tools`.
    pub async fn refresh_tools(&self) -> Result<Arc<Catalog>, Error> {
        let tools: Vec<Tool> = self.list(method::TOOLS_LIST).await?;
        let modern = self.revision().era() == mcp_wire::Era::Modern;
        let mut catalog = Catalog::default();
        for tool in tools {
            match route(&tool) {
                Ok(route) => {
                    catalog.routes.insert(tool.name.clone(), route);
                    catalog.tools.push(tool);
                }
                // Annotations mean nothing to a legacy server: only a modern listing drops.
                Err(_) if !modern => catalog.tools.push(tool),
                Err(reason) => {
                    tracing::debug!(tool = %tool.name, %reason, "tool dropped from the listing");
                    catalog.dropped.push(DroppedTool {
                        tool: tool.name,
                        reason,
                    });
                }
            }
        }
        let catalog = Arc::new(catalog);
        self.catalog.store(catalog.clone());
        Ok(catalog)
    }

    /// Every resource, following `nextCursor` to the end.
    pub async fn list_resources(&self) -> Result<Vec<Resource>, Error> {
        self.list(method::RESOURCES_LIST).await
    }

    /// Every resource template.
    pub async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, Error> {
        self.list(method::RESOURCES_TEMPLATES_LIST).await
    }

    /// Every prompt.
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, Error> {
        self.list(method::PROMPTS_LIST).await
    }

    /// Every item of a paginated list, each page bounded by the connection's timeout.
    async fn list<T: PageItem + DeserializeOwned>(&self, list: &str) -> Result<Vec<T>, Error> {
        let mut items = Vec::new();
        let mut cursor: Option<Cursor> = None;
        loop {
            let params = PageParams::new(cursor.take(), None);
            let page: Page<T> = self
                .request(list, &params, Target::default(), |_| {}, &mut pin!(never()))
                .await?;
            items.extend(page.items);
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(items),
            }
        }
    }

    /// Calls a tool with `arguments` (a JSON object, or `null` for none). A tool that ran and
    /// failed is `Ok` with [`CallToolResult::is_error`]; a protocol fault is [`Error::Rpc`].
    #[inline]
    pub fn call_tool(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> impl Future<Output = Result<CallToolResult, Error>> {
        let arguments = match arguments {
            serde_json::Value::Object(map) => Ok(Some(map)),
            serde_json::Value::Null => Ok(None),
            _ => Err(Error::Arguments),
        };
        self.call_tool_checked(name, arguments, None, |_| {}, never())
    }

    /// Calls a tool, with `meta` added to the request's `_meta` (keys the client writes
    /// itself are not overridden). The call asks for progress (its id is the token), so a
    /// server can keep a long call alive by reporting it; progress and other notifications
    /// go to `on_notice`.
    #[inline]
    pub fn call_tool_with(
        &self,
        name: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        meta: Option<&Meta>,
        on_notice: impl FnMut(Notice),
    ) -> impl Future<Output = Result<CallToolResult, Error>> {
        self.call_tool_checked(name, Ok(arguments), meta, on_notice, never())
    }

    /// As [`Client::call_tool_with`], cancelled when `cancel` completes first
    /// ([`Error::Cancelled`]): a 2026-07-28 server sees the call's stream close, a legacy one
    /// is sent `notifications/cancelled`. A call given up at the connection's silence bound
    /// is told the same way.
    #[inline]
    pub fn call_tool_until(
        &self,
        name: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        meta: Option<&Meta>,
        on_notice: impl FnMut(Notice),
        cancel: impl Future<Output = ()> + Send,
    ) -> impl Future<Output = Result<CallToolResult, Error>> {
        self.call_tool_checked(name, Ok(arguments), meta, on_notice, cancel)
    }

    /// The call of the three above, given its arguments or why they were refused. They
    /// return its future itself, not one wrapping it (which would hold its state again), and
    /// are inlined, so that a caller's crate builds that state where it awaits it rather
    /// than building it elsewhere and copying it there (1.5 KB, twice, on every call).
    async fn call_tool_checked(
        &self,
        name: &str,
        arguments: Result<Option<serde_json::Map<String, serde_json::Value>>, Error>,
        meta: Option<&Meta>,
        mut on_notice: impl FnMut(Notice),
        cancel: impl Future<Output = ()> + Send,
    ) -> Result<CallToolResult, Error> {
        let arguments = arguments?;
        let current = self.current();
        let routing = {
            let catalog = self.catalog.load();
            if let Some(dropped) = catalog.dropped.iter().find(|d| d.tool == name) {
                return Err(Error::ToolDropped(dropped.clone()));
            }
            match (&current.dialed.link, catalog.routes.get(name)) {
                (Link::Modern { .. }, Some(route)) => route.routing(arguments.as_ref())?,
                (Link::Modern { .. }, None) => Routing::named(name)?,
                (Link::Legacy(_), _) => Routing::default(),
            }
        };
        let mut params = CallToolParams::new(name);
        params.arguments = arguments;
        let target = Target {
            routing: Some(&routing),
            progress: true,
            meta,
        };
        let mut cancel: Cancel<'_> = pin!(cancel);
        let answer = |p: &mut CallToolParams, responses, state| {
            p.input_responses = responses;
            p.request_state = state;
        };
        let Link::Modern {
            transport,
            meta: rendered,
        } = &current.dialed.link
        else {
            // The general path, each request on the link current when it is sent; boxed, so
            // that a 2026-07-28 call's future holds only the round below.
            drop(current);
            let general = self.with_input(None, params, target, on_notice, &mut cancel, answer);
            return Box::pin(general).await;
        };
        // The common case inlined (as `send` and `request` do it for any request): one round
        // on a 2026-07-28 link, whose cancel and silence bound need nothing sent (the server
        // sees the call's stream close).
        let answered = {
            let round = pin!(async {
                let id = self.dialer.call_id();
                let body = request_body(&id, method::TOOLS_CALL, &params, target, Some(rendered))?;
                let call = transport
                    .call::<Outcome<CallToolResult>>(id, method::TOOLS_CALL, body, &routing)
                    .await?;
                Ok::<_, Error>(call.response(&mut on_notice).await?)
            });
            before_cancel(round, &mut cancel).await
        };
        match answered.ok_or(Error::Cancelled)??.outcome {
            Ok(Outcome::Complete(result)) => Ok(result),
            Ok(outcome) => {
                // Boxed: a rare path, kept out of every call's future.
                let rounds = self.with_input(
                    Some(outcome),
                    params,
                    target,
                    on_notice,
                    &mut cancel,
                    answer,
                );
                Box::pin(rounds).await
            }
            Err(e) => Err(Error::Rpc(e)),
        }
    }

    /// Reads a resource. A read answered with `input_required` fails
    /// ([`Error::Unanswerable`]), as the reference's known limits say.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, Error> {
        let params = ReadResourceParams::new(uri);
        let routing = Routing::named(uri)?;
        let target = Target {
            routing: Some(&routing),
            ..Target::default()
        };
        match self
            .request::<_, Outcome<ReadResourceResult>>(
                method::RESOURCES_READ,
                &params,
                target,
                |_| {},
                &mut pin!(never()),
            )
            .await?
        {
            Outcome::Complete(result) => Ok(result),
            Outcome::InputRequired(_) => Err(Error::Unanswerable {
                method: method::RESOURCES_READ.into(),
            }),
        }
    }

    /// Gets a prompt, answering the server's questions as a call does.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<std::collections::BTreeMap<String, String>>,
    ) -> Result<GetPromptResult, Error> {
        let mut params = GetPromptParams::new(name);
        params.arguments = arguments;
        let routing = Routing::named(name)?;
        let target = Target {
            routing: Some(&routing),
            ..Target::default()
        };
        self.with_input(
            None,
            params,
            target,
            |_| {},
            &mut pin!(never()),
            |p, responses, state| {
                p.input_responses = responses;
                p.request_state = state;
            },
        )
        .await
    }

    /// Asks for completions of an argument.
    pub async fn complete(&self, params: &CompleteParams) -> Result<CompleteResult, Error> {
        self.request(
            method::COMPLETION_COMPLETE,
            params,
            Target::default(),
            |_| {},
            &mut pin!(never()),
        )
        .await
    }

    /// One page of the server's MCP Events types (`events/list`); the caller pages, within
    /// its bounds.
    pub async fn list_events(
        &self,
        cursor: Option<Cursor>,
    ) -> Result<mcp_wire::events::ListEventsResult, Error> {
        self.raw_request(method::EVENTS_LIST, &PageParams::new(cursor, None))
            .await
    }

    /// `events/poll`.
    pub async fn poll_events(
        &self,
        params: &mcp_wire::events::PollParams,
    ) -> Result<mcp_wire::events::PollResult, Error> {
        self.raw_request(method::EVENTS_POLL, params).await
    }

    /// `events/subscribe`: a webhook subscription made, or its lease refreshed.
    pub async fn subscribe_events(
        &self,
        params: &mcp_wire::events::SubscribeEventsParams,
    ) -> Result<mcp_wire::events::SubscribeEventsResult, Error> {
        self.raw_request(method::EVENTS_SUBSCRIBE, params).await
    }

    /// `events/unsubscribe`.
    pub async fn unsubscribe_events(
        &self,
        params: &mcp_wire::events::UnsubscribeEventsParams,
    ) -> Result<(), Error> {
        let _: serde_json::Value = self.raw_request(method::EVENTS_UNSUBSCRIBE, params).await?;
        Ok(())
    }

    /// Sends a request that may be answered `input_required`, answering every round through
    /// the client's features (an elicitation bounded by its timeout), echoing
    /// `requestState`, with a new id each round, up to [`MAX_INPUT_ROUNDS`] rounds in all.
    /// `first` is the first round's outcome when the caller sent it; `None` sends it here.
    async fn with_input<P, T>(
        &self,
        first: Option<Outcome<T>>,
        mut params: P,
        target: Target<'_>,
        mut on_notice: impl FnMut(Notice),
        cancel: &mut Cancel<'_>,
        answer: impl Fn(&mut P, Option<InputResponses>, Option<String>),
    ) -> Result<T, Error>
    where
        P: Serialize + HasMethod,
        Outcome<T>: DeserializeOwned,
    {
        let mut outcome = match first {
            Some(outcome) => outcome,
            None => {
                self.request(P::METHOD, &params, target, &mut on_notice, cancel)
                    .await?
            }
        };
        for round in 1..=MAX_INPUT_ROUNDS {
            let asked = match outcome {
                Outcome::Complete(result) => return Ok(result),
                // The last round's answer would never be sent: nobody is asked for it.
                Outcome::InputRequired(_) if round == MAX_INPUT_ROUNDS => break,
                Outcome::InputRequired(asked) => asked,
            };
            // A person may be asked: the request's cancel ends the wait (and the question
            // with it), and no further round is sent.
            let (responses, state) = tokio::select! {
                biased;
                answered = self.answer(asked) => answered?,
                () = cancel.as_mut() => return Err(Error::Cancelled),
            };
            answer(&mut params, responses, state);
            outcome = self
                .request(P::METHOD, &params, target, &mut on_notice, cancel)
                .await?;
        }
        Err(Error::TooManyRounds)
    }

    /// Answers one `input_required` round.
    async fn answer(
        &self,
        asked: InputRequired,
    ) -> Result<(Option<InputResponses>, Option<String>), Error> {
        let Some(requests) = asked.input_requests else {
            return Ok((None, asked.request_state));
        };
        let max = self.dialer.answering_max();
        if requests.len() > max {
            return Err(Error::TooManyInputs {
                asked: requests.len(),
                max,
            });
        }
        let mut responses = InputResponses::new();
        let features = self.dialer.features();
        for (key, request) in requests {
            let answer = match features
                .answer(&request.method, request.params.as_ref())
                .await
            {
                Some(Answer::Elicitation(answer)) => InputResponse::from(answer),
                Some(Answer::Roots(answer)) => InputResponse::from(answer),
                // Params it cannot take (malformed, or a mode it did not declare).
                Some(Answer::Invalid(_)) => {
                    return Err(Error::Unanswerable {
                        method: request.method,
                    });
                }
                // An elicitation the client did not declare is answered cancel.
                None if request.method == method::ELICITATION_CREATE => {
                    InputResponse::from(ElicitResult::new(ElicitAction::Cancel))
                }
                _ => {
                    return Err(Error::Unanswerable {
                        method: request.method,
                    });
                }
            };
            responses.insert(key, answer);
        }
        Ok((Some(responses), asked.request_state))
    }

    /// Sends one request on the current link and reads it to its response; a lost legacy
    /// session is dialed again and the request sent again, once.
    async fn request<P: Serialize, T: DeserializeOwned>(
        &self,
        method_name: &str,
        params: &P,
        target: Target<'_>,
        mut on_notice: impl FnMut(Notice),
        cancel: &mut Cancel<'_>,
    ) -> Result<T, Error> {
        let mut redialed = false;
        loop {
            let current = self.current();
            match self
                .send(
                    &current,
                    method_name,
                    params,
                    target,
                    &mut on_notice,
                    cancel,
                )
                .await
            {
                Err(Error::Transport(mcp_transport::Error::SessionLost))
                    if !redialed && self.dialer.recovery() == Recovery::AtOnce =>
                {
                    redialed = true;
                    // A cut during the handshake is a cut: the dial is left to the next
                    // request.
                    tokio::select! {
                        biased;
                        // Boxed: a rare path, kept out of every request's future.
                        dialed = Box::pin(self.redial_from(current.generation)) => dialed?,
                        () = cancel.as_mut() => return Err(Error::Cancelled),
                    }
                }
                Err(e @ Error::Transport(mcp_transport::Error::SessionLost)) => {
                    self.mark_lost();
                    return Err(e);
                }
                Err(e) => return Err(e),
                Ok(response) => return response.outcome.map_err(Error::Rpc),
            }
        }
    }

    async fn send<P: Serialize, T: DeserializeOwned>(
        &self,
        current: &Current,
        method_name: &str,
        params: &P,
        target: Target<'_>,
        on_notice: &mut impl FnMut(Notice),
        cancel: &mut Cancel<'_>,
    ) -> Result<TypedResponse<T>, Error> {
        let id = self.dialer.call_id();
        // Kept for a cancel, or the silence bound, met before the answer's head (or its JSON
        // body).
        let sent = id.clone();
        // Each future is pinned where it is made, and raced against the cancel by reference:
        // a call's state is not copied into the race. What is in hand first wins: an answer
        // that came with the cancel is kept.
        let started = {
            let call = pin!(async {
                Ok::<_, Error>(match &current.dialed.link {
                    Link::Modern {
                        transport,
                        meta: rendered,
                    } => {
                        let body = request_body(&id, method_name, params, target, Some(rendered))?;
                        let plain = Routing::default();
                        let routing = target.routing.unwrap_or(&plain);
                        transport.call::<T>(id, method_name, body, routing).await?
                    }
                    Link::Legacy(transport) => {
                        let body = request_body(&id, method_name, params, target, None)?;
                        transport.call::<T>(id, method_name, body, None).await?.call
                    }
                })
            });
            tokio::select! {
                biased;
                call = call => Some(call),
                () = cancel.as_mut() => None,
            }
        };
        let mut call = match started {
            Some(Ok(call)) => call,
            Some(Err(e)) => {
                // Given up at the silence bound before its answer began.
                if matches!(e, Error::Transport(TransportError::Silent { .. })) {
                    told_silent(&current.dialed.link, sent);
                }
                return Err(e);
            }
            None => {
                // A 2026-07-28 request is abandoned with its connection's stream; a legacy
                // server is told, on a task of the transport's: the cancel is not held up.
                if let Link::Legacy(transport) = &current.dialed.link {
                    transport.cancel(sent, Some(CANCELLED.into()));
                }
                return Err(Error::Cancelled);
            }
        };
        let read = {
            let read = pin!(async {
                loop {
                    match call.next().await? {
                        Some(Delivery::Notification(n)) => on_notice(n),
                        Some(Delivery::Response(r)) => return Ok(r),
                        None => return Err(mcp_transport::Error::Ended),
                    }
                }
            });
            tokio::select! {
                biased;
                read = read => Some(read),
                () = cancel.as_mut() => None,
            }
        };
        match read {
            Some(Err(e @ TransportError::Silent { .. })) => {
                // Given up at the silence bound mid-answer (the call is over on its side, so
                // the server is told through the link).
                told_silent(&current.dialed.link, sent);
                Err(e.into())
            }
            Some(read) => Ok(read?),
            None => {
                call.cancel(Some(CANCELLED.into()));
                Err(Error::Cancelled)
            }
        }
    }

    /// Dials again the way the connection first got there, unless another request did so
    /// already since `generation`.
    async fn redial_from(&self, generation: u64) -> Result<(), Error> {
        let _one_at_a_time = self.redial.lock().await;
        if self.current().generation != generation {
            return Ok(());
        }
        let reached_by = self.current().dialed.connected.reached_by;
        tracing::debug!(generation, "the legacy session was lost: dialing again");
        let dialed = self
            .dialer
            .dial(Start::Like(reached_by))
            .await
            .map_err(Error::Negotiation)?;
        self.current.store(Arc::new(Current {
            dialed,
            generation: generation + 1,
        }));
        self.lost.send_replace(false);
        Ok(())
    }
}

/// How calls to `tool` are routed, or why the tool is left out of a 2026-07-28 listing.
fn route(tool: &Tool) -> Result<ToolRoute, InvalidAnnotation> {
    let headers = match ToolHeaders::from_schema(&tool.input_schema) {
        Ok(headers) => headers,
        Err(mcp_wire::Error::InvalidHeaderAnnotation(reason)) => return Err(reason),
        Err(_) => return Err(InvalidAnnotation::Schema),
    };
    // The annotations' names are HTTP tokens, so each makes a header name.
    ToolRoute::new(&tool.name, headers).map_err(|_| InvalidAnnotation::BadCharacter {
        name: tool.name.clone(),
    })
}

/// A request's body: its envelope, its `_meta` (the connection's 2026-07-28 keys when
/// `modern`, the id as progress token when the target asks for progress, the caller's own
/// keys) and its params.
fn request_body<P: Serialize>(
    id: &mcp_wire::RequestId,
    method_name: &str,
    params: &P,
    target: Target<'_>,
    modern: Option<&RenderedMeta>,
) -> Result<Bytes, Error> {
    let mut meta = RequestMeta::default();
    meta.modern = modern;
    meta.extra = target.meta;
    if target.progress {
        meta.progress_token = Some(id);
    }
    // Room for the envelope, a 2026-07-28 `_meta` and small arguments, grown only for more.
    let mut body = Vec::with_capacity(512);
    encode_request_with_meta(&mut body, id, method_name, params, &meta)
        .map_err(|e| Error::Transport(mcp_transport::Error::Malformed(e)))?;
    Ok(Bytes::from(body))
}

/// `work`'s output, or `None` when `cancel` completes first. `work` is polled first, so an
/// answer in hand when the cancel comes is kept; with the task's budget spent neither is
/// polled, as in `tokio::select!` (a cancel that does not count the budget would otherwise
/// win over an answer a spent budget holds back). The race of a 2026-07-28 call's round:
/// there a `biased` `tokio::select!` costs more (cachegrind at concurrency 64, per call:
/// about 40 more instruction and 40 more data cache misses).
fn before_cancel<T>(
    mut work: Pin<&mut impl Future<Output = T>>,
    cancel: &mut Cancel<'_>,
) -> impl Future<Output = Option<T>> {
    std::future::poll_fn(move |cx| {
        if !tokio::task::coop::has_budget_remaining() {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        match work.as_mut().poll(cx) {
            Poll::Ready(output) => Poll::Ready(Some(output)),
            Poll::Pending => cancel.as_mut().poll(cx).map(|()| None),
        }
    })
}

/// Tells a legacy server of a request given up at the silence bound, as of a cancel; a
/// 2026-07-28 one saw the request's stream close.
fn told_silent(link: &Link, id: mcp_wire::RequestId) {
    if let Link::Legacy(transport) = link {
        transport.cancel(id, Some(SILENT.into()));
    }
}

/// A signal that never comes.
fn never() -> std::future::Pending<()> {
    std::future::pending()
}

/// The reason a cancelled request gives its server.
const CANCELLED: &str = "cancelled by the client";

/// The reason a request given up at the connection's silence bound gives its server.
const SILENT: &str = "no answer within the client's timeout";

/// A signal that cancels a request when it completes.
type Cancel<'a> = Pin<&'a mut (dyn Future<Output = ()> + Send)>;

/// Where a request goes and what it carries besides its params.
#[derive(Debug, Clone, Copy, Default)]
struct Target<'a> {
    /// `Mcp-Name` and `Mcp-Param-*` (2026-07-28); none when `None`.
    routing: Option<&'a Routing>,
    /// Ask for progress notifications (the request id is the token).
    progress: bool,
    /// The caller's own `_meta` keys.
    meta: Option<&'a Meta>,
}

/// The method of a request whose answer may be `input_required`.
trait HasMethod {
    const METHOD: &'static str;
}

impl HasMethod for CallToolParams {
    const METHOD: &'static str = method::TOOLS_CALL;
}

impl HasMethod for GetPromptParams {
    const METHOD: &'static str = method::PROMPTS_GET;
}
