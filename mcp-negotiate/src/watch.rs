//! Hearing about changes: resource subscriptions and list_changed, the same in both eras.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use mcp_transport::driver::{Call, Delivery, Notice, Routing};
use mcp_wire::{
    ListenFilter, ListenParams, RequestMeta, ServerNotification, SubscribeParams,
    encode_request_with_meta, method,
};
use serde_json::Value;

use crate::client::{Client, Error};
use crate::listen::{Action, Ended, Interest, ListenEvent, Listener, idle_limit};
use crate::{Link, Recovery};

/// A change the server reported, or something about the push channel worth logging.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Change {
    /// A subscribed resource changed (also given for every held URI after a gap in a
    /// listen, since changes during the gap were not delivered).
    ResourceUpdated {
        /// The resource.
        uri: String,
    },
    /// The server's tool list changed.
    ToolsChanged,
    /// The server's resource list changed.
    ResourcesChanged,
    /// The server's prompt list changed.
    PromptsChanged,
    /// The server's MCP Events types changed.
    EventsChanged,
    /// What happened to the listen (2026-07-28), for the log.
    Listen(ListenEvent),
}

/// Hearing about changes: resource subscriptions and list_changed, the same in both eras.
///
/// A [`Watch`] is driven by its owner: [`Watch::next`] waits for the next [`Change`] while it
/// keeps the server's push channel open. On 2026-07-28 that channel is one
/// `subscriptions/listen`, run by the pure [`Listener`](crate::listen::Listener); on
/// 2025-11-25 it is the GET stream, with `resources/subscribe` and `resources/unsubscribe`
/// per URI.
pub struct Watch {
    connection: Arc<Client>,
    held: BTreeSet<String>,
    queued: VecDeque<Change>,
    era: Era,
}

enum Era {
    Modern {
        listener: Box<Listener>,
        listen: Option<Call<Value>>,
        /// The listen being opened waits for its acknowledgment.
        acknowledged: bool,
        /// The filter of an open the listener asked for and that has not returned yet: a
        /// call cancelled while opening opens it again on the next turn.
        opening: Option<ListenFilter>,
    },
    Legacy {
        stream: Option<Call<()>>,
        /// The server offers no GET stream (405): no pushes.
        none: bool,
        /// The session was lost and its owner re-dials: the held URIs are asked for again
        /// before the stream is opened again.
        resubscribe: bool,
    },
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

impl Watch {
    /// Starts watching `connection`: list_changed is asked for at once.
    pub fn new(connection: Arc<Client>) -> Self {
        let caps = connection.capabilities();
        let era = match connection.revision().era() {
            mcp_wire::Era::Modern => Era::Modern {
                listener: Box::new({
                    let listener = Listener::new(
                        connection.timeout(),
                        caps.tools_list_changed(),
                        caps.resources_subscribe(),
                    );
                    match caps.events_list_changed() {
                        true => listener.with_events_list_changed(),
                        false => listener,
                    }
                }),
                listen: None,
                acknowledged: false,
                opening: None,
            },
            _ => Era::Legacy {
                stream: None,
                none: false,
                resubscribe: false,
            },
        };
        Self {
            connection,
            held: BTreeSet::new(),
            queued: VecDeque::new(),
            era,
        }
    }

    /// The URIs held.
    pub fn held(&self) -> impl Iterator<Item = &str> {
        self.held.iter().map(String::as_str)
    }

    /// Subscribes to a concrete resource URI; only where the server advertises
    /// `resources.subscribe`.
    pub async fn subscribe(&mut self, uri: &str) -> Result<(), Error> {
        self.check(uri)?;
        if let Era::Legacy { .. } = self.era {
            self.legacy_subscription(method::RESOURCES_SUBSCRIBE, uri)
                .await?;
        }
        self.held.insert(uri.to_owned());
        self.want();
        Ok(())
    }

    /// Releases a subscription. On 2025-11-25 it stays held until the server took the
    /// `resources/unsubscribe`, so a release that failed can be tried again.
    pub async fn unsubscribe(&mut self, uri: &str) -> Result<(), Error> {
        if !self.held.contains(uri) {
            return Ok(());
        }
        if let Era::Legacy { .. } = self.era {
            self.legacy_subscription(method::RESOURCES_UNSUBSCRIBE, uri)
                .await?;
        }
        self.held.remove(uri);
        self.want();
        Ok(())
    }

    fn check(&self, uri: &str) -> Result<(), Error> {
        match self.connection.capabilities().resources_subscribe() && !uri.contains('{') {
            true => Ok(()),
            false => Err(Error::Unanswerable {
                method: method::RESOURCES_SUBSCRIBE.into(),
            }),
        }
    }

    fn want(&mut self) {
        if let Era::Modern { listener, .. } = &mut self.era {
            let interest = self
                .held
                .iter()
                .fold(Interest::default(), |i, u| i.with_uri(u.clone()));
            listener.want(interest, now());
        }
    }

    async fn legacy_subscription(&self, which: &str, uri: &str) -> Result<(), Error> {
        let _: Value = self
            .connection
            .raw_request(which, &SubscribeParams::new(uri))
            .await?;
        Ok(())
    }

    /// The owner could not keep up with what the watch gave it: changes it passed on were
    /// lost before they were used.
    ///
    /// On 2026-07-28 the listen held now is dropped and ended as
    /// [`Ended::FellBehind`](crate::listen::Ended::FellBehind): [`Watch::next`] gives
    /// [`ListenEvent::Ended`] with [`EndReason::Behind`](crate::listen::EndReason::Behind),
    /// opens the listen again on the listen schedule, and then gives every held URI again
    /// ([`Change::ResourceUpdated`]), as after any gap. Nothing happens when no listen is
    /// held (it is being opened again already).
    ///
    /// On 2025-11-25 it does nothing: the listen rules are 2026-07-28's. There, changes ride
    /// the session's GET stream and its per-URI subscriptions, which hold whatever the owner
    /// reads; there is no listen to end, and no acknowledgment after which the held URIs
    /// could be given again.
    pub fn fell_behind(&mut self) {
        if let Era::Modern {
            listener,
            listen,
            acknowledged,
            ..
        } = &mut self.era
            && listen.take().is_some()
        {
            *acknowledged = false;
            listener.on_ended(Ended::FellBehind, now());
        }
    }

    /// Opens the push channel now, when it is a legacy GET stream, so that what the server
    /// sends there from this moment is not lost; `false` when the server offers none (405).
    /// A 2026-07-28 listen opens with the first [`Watch::next`].
    pub async fn open(&mut self) -> Result<bool, Error> {
        let Era::Legacy { stream, none, .. } = &mut self.era else {
            return Ok(true);
        };
        if stream.is_none() && !*none {
            match self.connection.legacy_stream().await? {
                Some(opened) => *stream = Some(opened),
                None => *none = true,
            }
        }
        Ok(!*none)
    }

    /// The next change; `Ok(None)` when the server can push nothing (no GET stream, or a
    /// listen refused outright).
    ///
    /// A lost legacy session is dialed again here, and every held subscription asked for
    /// again, when the connection recovers [`Recovery::AtOnce`](crate::Recovery::AtOnce).
    /// With [`Recovery::ByOwner`](crate::Recovery::ByOwner) the loss is the transport's
    /// `SessionLost` error; once the owner has called
    /// [`Client::redial`](crate::Client::redial) and asked again for what it holds
    /// ([`Watch::subscribe`] with each of [`Watch::held`], each bounded as the owner sees
    /// fit), the next call opens the stream again. Any other failure of the stream is
    /// returned too, and the next call opens it again.
    ///
    /// Cancel-safe: a call dropped before it returns (a `select!` branch that lost) loses no
    /// change, and the next call takes up where it stopped (a listen being opened is opened
    /// again, subscriptions being asked for again are asked for again).
    pub async fn next(&mut self) -> Result<Option<Change>, Error> {
        loop {
            if let Some(change) = self.queued.pop_front() {
                return Ok(Some(change));
            }
            let step = match self.era {
                Era::Legacy { .. } => self.legacy_step().await?,
                Era::Modern { .. } => self.modern_step().await?,
            };
            match step {
                Step::Change(Some(change)) => return Ok(Some(change)),
                Step::Change(None) | Step::Nothing => {}
                Step::Refused => return Ok(None),
                Step::Lost => match self.connection.recovery() {
                    Recovery::AtOnce => {
                        // Marked first, so that a call cancelled from here on still asks
                        // again.
                        if let Era::Legacy { resubscribe, .. } = &mut self.era {
                            *resubscribe = true;
                        }
                        self.connection.redial().await?;
                    }
                    // The owner re-dials, and asks again for what it holds, on its schedule.
                    _ => {
                        self.connection.mark_lost();
                        return Err(mcp_transport::Error::SessionLost.into());
                    }
                },
            }
        }
    }

    /// One turn of the GET stream: open it if need be, then wait for what it brings.
    async fn legacy_step(&mut self) -> Result<Step, Error> {
        if let Era::Legacy {
            resubscribe: true, ..
        } = self.era
        {
            match self.resubscribe().await {
                Ok(()) => {}
                Err(Error::Transport(mcp_transport::Error::SessionLost)) => return Ok(Step::Lost),
                Err(e) => return Err(e),
            }
            if let Era::Legacy { resubscribe, .. } = &mut self.era {
                *resubscribe = false;
            }
        }
        let Era::Legacy { stream, none, .. } = &mut self.era else {
            return Ok(Step::Nothing);
        };
        if *none {
            return Ok(Step::Refused);
        }
        if stream.is_none() {
            match self.connection.legacy_stream().await {
                Ok(Some(opened)) => *stream = Some(opened),
                Ok(None) => {
                    *none = true;
                    return Ok(Step::Refused);
                }
                Err(Error::Transport(mcp_transport::Error::SessionLost)) => return Ok(Step::Lost),
                Err(e) => return Err(e),
            }
        }
        let Some(call) = stream.as_mut() else {
            return Ok(Step::Nothing);
        };
        match call.next().await {
            Ok(Some(Delivery::Notification(n))) => Ok(Step::Change(change_of(&n))),
            Ok(_) => Ok(Step::Nothing),
            Err(e) => {
                *stream = None;
                match e {
                    mcp_transport::Error::SessionLost => Ok(Step::Lost),
                    e => Err(e.into()),
                }
            }
        }
    }

    /// Asks again for every held subscription, on a new legacy session.
    async fn resubscribe(&mut self) -> Result<(), Error> {
        let held: Vec<String> = self.held.iter().cloned().collect();
        for uri in held {
            self.legacy_subscription(method::RESOURCES_SUBSCRIBE, &uri)
                .await?;
        }
        Ok(())
    }

    /// One turn of the listen: act on what the listener says, then wait for the listen or
    /// for the listener's next deadline.
    async fn modern_step(&mut self) -> Result<Step, Error> {
        let Era::Modern {
            listener,
            listen,
            acknowledged,
            opening,
        } = &mut self.era
        else {
            return Ok(Step::Nothing);
        };
        while let Some(event) = listener.poll_event() {
            self.queued.push_back(Change::Listen(event));
        }
        if !self.queued.is_empty() {
            return Ok(Step::Nothing);
        }
        let action = match opening.clone() {
            Some(filter) => Some(Action::Open(filter)),
            None => listener.poll_action(now()),
        };
        match action {
            Some(Action::Open(filter)) => {
                *opening = Some(filter.clone());
                let params = ListenParams::new(filter, None);
                let opened = self.connection.open_listen(&params).await;
                *opening = None;
                match opened {
                    Ok(call) => {
                        *listen = Some(call);
                        *acknowledged = false;
                    }
                    Err(e) => listener.on_ended(Ended::Unavailable(e.to_string()), now()),
                }
                return Ok(Step::Nothing);
            }
            Some(Action::Close) => {
                *listen = None;
                return Ok(Step::Nothing);
            }
            Some(Action::ReadAgain(uris)) => {
                self.queued
                    .extend(uris.into_iter().map(|uri| Change::ResourceUpdated { uri }));
                return Ok(Step::Nothing);
            }
            _ => {}
        }
        if listener.is_refused() {
            return Ok(Step::Refused);
        }
        let deadline = listener.poll_timeout();
        let Some(call) = listen.as_mut() else {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending::<()>().await,
            }
            return Ok(Step::Nothing);
        };
        let sleep = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending::<()>().await,
            }
        };
        let delivered = tokio::select! {
            delivered = call.next() => delivered,
            () = sleep => return Ok(Step::Nothing),
        };
        let at = now();
        match delivered {
            Ok(Some(Delivery::Notification(n))) => match n.decode() {
                Ok(ServerNotification::SubscriptionsAcknowledged(ack)) if !*acknowledged => {
                    *acknowledged = true;
                    listener.on_acknowledged(&ack.notifications, at);
                    Ok(Step::Nothing)
                }
                _ => {
                    listener.on_notification(at);
                    Ok(Step::Change(change_of(&n)))
                }
            },
            Ok(Some(Delivery::Response(r))) => {
                let why = match r.outcome {
                    Err(e) if matches!(e.code, -32601 | -32602) => Ended::Refused(e.code),
                    Err(e) => Ended::Unavailable(e.to_string()),
                    Ok(_) => Ended::ByServer,
                };
                *listen = None;
                listener.on_ended(why, at);
                Ok(Step::Nothing)
            }
            Ok(None) | Err(_) => {
                *listen = None;
                listener.on_ended(Ended::ByServer, at);
                Ok(Step::Nothing)
            }
        }
    }
}

enum Step {
    Change(Option<Change>),
    Nothing,
    /// Nothing will ever be pushed.
    Refused,
    /// The legacy session is gone.
    Lost,
}

fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// The change a notification reports, if it is one.
fn change_of(n: &Notice) -> Option<Change> {
    match n.decode().ok()? {
        ServerNotification::ResourceUpdated(p) => Some(Change::ResourceUpdated { uri: p.uri }),
        ServerNotification::ToolListChanged => Some(Change::ToolsChanged),
        ServerNotification::ResourceListChanged => Some(Change::ResourcesChanged),
        ServerNotification::PromptListChanged => Some(Change::PromptsChanged),
        ServerNotification::EventsListChanged => Some(Change::EventsChanged),
        _ => None,
    }
}

impl Client {
    /// Opens a `subscriptions/listen` on the current (modern) link; the listen's silence
    /// bound is the listen idle limit, since the listener closes a quiet listen itself.
    pub(crate) async fn open_listen(&self, params: &ListenParams) -> Result<Call<Value>, Error> {
        let current = self.link();
        let Link::Modern { transport, meta } = &current else {
            return Err(Error::Unanswerable {
                method: method::SUBSCRIPTIONS_LISTEN.into(),
            });
        };
        let id = self.next_id();
        let mut request_meta = RequestMeta::default();
        request_meta.modern = Some(meta);
        let mut body = Vec::with_capacity(256);
        encode_request_with_meta(
            &mut body,
            &id,
            method::SUBSCRIPTIONS_LISTEN,
            params,
            &request_meta,
        )
        .map_err(|e| Error::Transport(mcp_transport::Error::Malformed(e)))?;
        let mut routing = Routing::default();
        routing.silence = Some(idle_limit(self.timeout()).saturating_mul(2));
        Ok(transport
            .call::<Value>(
                id,
                method::SUBSCRIPTIONS_LISTEN,
                Bytes::from(body),
                &routing,
            )
            .await?)
    }

    /// Opens the GET stream of the current (legacy) link; `None` when the server offers none.
    pub(crate) async fn legacy_stream(&self) -> Result<Option<Call<()>>, Error> {
        match self.link() {
            Link::Legacy(transport) => Ok(transport.server_stream().await?),
            Link::Modern { .. } => Ok(None),
        }
    }
}
