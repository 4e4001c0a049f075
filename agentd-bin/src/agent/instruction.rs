//! The instruction: resource `[instruction] uri` of `server`, read through the supervisor's
//! connection to the server and used as the system prompt of every turn.
//!
//! It is read once its server is connected, and followed from then on:
//! - where the server offers subscriptions (`resources.subscribe`), it is subscribed (owner
//!   [`OWNER`]) and read again at each `notifications/resources/updated` of its URI
//!   (notify-then-read). A subscribe that fails is logged (`instruction.subscribe.fail`) and
//!   asked for again on [`SUBSCRIBE_RETRY`] (1 s, doubling to 30 s), the instruction read again once it
//!   is taken;
//! - else the instruction is followed by its refresh alone (`instruction.subscribe.unsupported`,
//!   once per URI): read again every `[instruction] refresh` (5 min when not set).
//!
//! It is read again too when its server is dialed again (a lost session, a reload), when
//! resource updates were missed, and at each MCP Events occurrence appended into the stream
//! `instruction` (`instruction.event`, with the occurrence's server and type:
//! [`STREAM`](agentd_tools::instruction::STREAM)).
//!
//! A read's text is the resource's text contents joined by a newline, at most
//! [`TEXT_MAX`] bytes. A read that fails, binary contents, or a text past the bound keep the
//! instruction read before (`instruction.read.fail`).
//!
//! `instruction.subscribe` follows another URI (of the same server, or another) once it is
//! read: the one followed before is released, and a read that fails changes nothing. A
//! reload whose `[instruction]` names another source follows it (its text unknown until it
//! is read); one without `[instruction]` follows nothing; one whose `[instruction]` is the
//! same keeps what `instruction.subscribe` chose.
//!
//! What a turn uses: [`Instruction::system`] (the system prompt, none before the first read),
//! read as the turn starts. The supervisor tells it
//! what happened ([`Instruction::connected`], [`Instruction::updated`],
//! [`Instruction::missed`], [`Instruction::event`], [`Instruction::reload`]).

use std::sync::Arc;
use std::time::Duration;

use agentd_tools::Error;
use agentd_tools::instruction::TEXT_MAX;
use agentd_tools::instruction::{Current, Source};
use mcp_wire::ResourceContents;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::model::Message;
use super::servers::{Refused, Servers};
use crate::clock::{Backoff, SUBSCRIBE_RETRY, wall_ms};
use crate::config;
use crate::telemetry::catalogue::{own, subscriptions};

/// Who the instruction's subscription belongs to, on its server.
pub(crate) const OWNER: &str = "instruction";

/// The longest wait for a subscribe or a release to be answered by the server's task (which
/// takes orders while it holds a connection): past it, a subscribe counts as failed.
const ORDER_WITHIN: Duration = Duration::from_secs(10);

/// The instruction: what the turns and the tools read, and where the supervisor tells what
/// happened. Cloned freely; its task ends at shutdown.
#[derive(Debug, Clone)]
pub(crate) struct Instruction {
    current: watch::Receiver<Current>,
    notes: mpsc::UnboundedSender<Note>,
}

/// What the instruction's task is told.
#[derive(Debug)]
enum Note {
    /// A server was connected: dialed, dialed again, or listed again at a reload.
    Connected(String),
    /// A subscribed resource changed.
    Updated { server: String, uri: String },
    /// Resource updates were missed.
    Missed,
    /// An occurrence was appended into the instruction's stream.
    Event { server: String, event_type: String },
    /// The configuration was reloaded.
    Reload(Option<config::Instruction>),
    /// `instruction.subscribe`.
    Follow {
        server: Option<String>,
        uri: String,
        answer: oneshot::Sender<Result<Current, Error>>,
    },
}

impl Instruction {
    /// Follows `config`'s instruction on `servers`, its task one of `tasks`, until
    /// `shutdown`; logged as `instance`'s.
    pub(crate) fn start(
        instance: &str,
        config: Option<&config::Instruction>,
        servers: Arc<dyn Servers>,
        tasks: &TaskTracker,
        shutdown: CancellationToken,
    ) -> Self {
        let (published, current) = watch::channel(Current::default());
        let (notes, noted) = mpsc::unbounded_channel();
        let task = Task {
            instance: instance.to_owned(),
            servers,
            configured: None,
            refresh: config::REFRESH,
            source: None,
            published,
            following: Following::Waiting,
            backoff: SUBSCRIBE_RETRY,
            asked: false,
            unsupported: false,
        };
        tasks.spawn(task.run(config.cloned(), noted, shutdown));
        Self { current, notes }
    }

    /// The instruction as followed now.
    pub(crate) fn current(&self) -> Current {
        self.current.borrow().clone()
    }

    /// The system prompt of a turn: the instruction's text as last read, if it was.
    pub(crate) fn system(&self) -> Option<Message> {
        let text = self.current.borrow().text.clone()?;
        Some(Message::System { text })
    }

    /// The instruction as followed, watched: marked changed at each read and each switch.
    #[cfg(test)]
    pub(crate) fn changes(&self) -> watch::Receiver<Current> {
        self.current.clone()
    }

    /// `server` was connected (dialed, dialed again, or listed again at a reload).
    pub(crate) fn connected(&self, server: &str) {
        self.note(Note::Connected(server.to_owned()));
    }

    /// Subscribed resource `uri` of `server` changed.
    pub(crate) fn updated(&self, server: &str, uri: &str) {
        let (server, uri) = (server.to_owned(), uri.to_owned());
        self.note(Note::Updated { server, uri });
    }

    /// Resource updates were missed (the supervisor fell behind them).
    pub(crate) fn missed(&self) {
        self.note(Note::Missed);
    }

    /// An occurrence of `event_type` from `server` was appended into the instruction's
    /// stream ([`STREAM`](agentd_tools::instruction::STREAM)).
    pub(crate) fn event(&self, server: &str, event_type: &str) {
        let (server, event_type) = (server.to_owned(), event_type.to_owned());
        self.note(Note::Event { server, event_type });
    }

    /// The configuration was reloaded: `config` is the `[instruction]` in force now.
    pub(crate) fn reload(&self, config: Option<&config::Instruction>) {
        self.note(Note::Reload(config.cloned()));
    }

    fn note(&self, note: Note) {
        // Gone only at shutdown.
        let _ = self.notes.send(note);
    }
}

impl agentd_tools::instruction::Instruction for Instruction {
    async fn current(&self) -> Result<Current, Error> {
        Ok(Self::current(self))
    }

    async fn follow(&self, server: Option<&str>, uri: &str) -> Result<Current, Error> {
        let (answer, answered) = oneshot::channel();
        let server = server.map(str::to_owned);
        let uri = uri.to_owned();
        self.note(Note::Follow {
            server,
            uri,
            answer,
        });
        answered.await.unwrap_or(Err(Error::ShuttingDown))
    }
}

/// How the instruction is followed now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Following {
    /// Nothing to follow, or its server is not connected: until it is.
    Waiting,
    /// Subscribed: read again at each update.
    Subscribed,
    /// The subscribe failed: asked for again at this time.
    Retrying(Instant),
    /// The server offers no subscriptions: read again at this time.
    Refreshing(Instant),
}

/// The instruction's task.
struct Task {
    instance: String,
    servers: Arc<dyn Servers>,
    /// The `[instruction]` in force.
    configured: Option<config::Instruction>,
    refresh: Duration,
    /// What is followed: the configured source, or the one `instruction.subscribe` chose.
    source: Option<Source>,
    published: watch::Sender<Current>,
    following: Following,
    backoff: Backoff,
    /// Whether the source was asked for on its server (its subscription is released when
    /// it is followed no more).
    asked: bool,
    /// Whether the source's server was found to offer no subscriptions (logged once).
    unsupported: bool,
}

impl Task {
    async fn run(
        mut self,
        config: Option<config::Instruction>,
        mut notes: mpsc::UnboundedReceiver<Note>,
        shutdown: CancellationToken,
    ) {
        if self.reconfigure(config).await {
            self.read().await;
        }
        loop {
            let due = match self.following {
                Following::Retrying(at) | Following::Refreshing(at) => Some(at),
                Following::Waiting | Following::Subscribed => None,
            };
            tokio::select! {
                () = shutdown.cancelled() => return,
                note = notes.recv() => {
                    let Some(note) = note else { return };
                    // What came together is taken together: one read for all of it, made
                    // before a switch is answered.
                    let mut stale = false;
                    let mut next = Some(note);
                    while let Some(note) = next.take() {
                        if matches!(note, Note::Follow { .. }) && std::mem::take(&mut stale) {
                            self.read().await;
                        }
                        stale |= self.take(note).await;
                        next = notes.try_recv().ok();
                    }
                    if stale {
                        self.read().await;
                    }
                }
                () = sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                    if self.due().await {
                        self.read().await;
                    }
                }
            }
        }
    }

    /// Takes `note`: whether the instruction is to be read again.
    async fn take(&mut self, note: Note) -> bool {
        let ours = |server: &str| self.source.as_ref().is_some_and(|s| s.server == server);
        match note {
            Note::Connected(server) if ours(&server) => {
                self.arm().await;
                true
            }
            Note::Updated { server, uri } => self
                .source
                .as_ref()
                .is_some_and(|s| s.server == server && s.uri == uri),
            Note::Missed => self.following == Following::Subscribed,
            Note::Event { server, event_type } => {
                if self.source.is_some() {
                    subscriptions::instruction_event(&self.instance, &server, &event_type);
                }
                self.source.is_some()
            }
            Note::Reload(config) => self.reconfigure(config).await,
            Note::Follow {
                server,
                uri,
                answer,
            } => {
                let _ = answer.send(self.follow(server, uri).await);
                false
            }
            Note::Connected(_) => false,
        }
    }

    /// A retry or a refresh is due: whether to read.
    async fn due(&mut self) -> bool {
        let now = Instant::now();
        match self.following {
            Following::Retrying(at) if at <= now => {
                self.arm().await;
                self.following == Following::Subscribed
            }
            Following::Refreshing(at) if at <= now => {
                self.following = Following::Refreshing(now + self.refresh);
                true
            }
            _ => false,
        }
    }

    /// Takes the `[instruction]` in force: whether the instruction is to be read.
    async fn reconfigure(&mut self, config: Option<config::Instruction>) -> bool {
        if config == self.configured {
            return false;
        }
        let source =
            |c: &Option<config::Instruction>| c.as_ref().map(|c| Source::new(&c.server, &c.uri));
        let (was, wanted) = (source(&self.configured), source(&config));
        self.refresh = config.as_ref().map_or(config::REFRESH, |c| c.refresh);
        self.configured = config;
        if was == wanted {
            // The refresh alone changed: the next one is a period from now.
            if let Following::Refreshing(_) = self.following {
                self.following = Following::Refreshing(Instant::now() + self.refresh);
            }
            return false;
        }
        self.switch(wanted).await;
        self.arm().await;
        true
    }

    /// `instruction.subscribe`: `uri` of `server` (the followed one's when `None`), followed
    /// once read.
    async fn follow(&mut self, server: Option<String>, uri: String) -> Result<Current, Error> {
        let followed = self.source.as_ref().map(|s| s.server.clone());
        let server = server.or(followed).ok_or_else(|| Error::NotFound {
            what: "instruction server: none is followed, name one".to_owned(),
        })?;
        let source = Source::new(&server, &uri);
        let text = read(&*self.servers, &source).await?;
        if self.source.as_ref() != Some(&source) {
            self.switch(Some(source)).await;
        }
        self.arm().await;
        self.published.send_modify(|c| {
            c.text = Some(text);
            c.read_at_ms = Some(wall_ms());
        });
        Ok(self.published.borrow().clone())
    }

    /// Follows `source` from now on: the one followed before is released, and nothing of it
    /// is kept.
    async fn switch(&mut self, source: Option<Source>) {
        if let Some(old) = self.source.take().filter(|_| self.asked) {
            let released = self.servers.release(&old.server, &old.uri, OWNER);
            // Its failure is the server's task's to log and try again.
            let _ = timeout(ORDER_WITHIN, released).await;
        }
        self.source = source;
        self.following = Following::Waiting;
        self.backoff = SUBSCRIBE_RETRY;
        self.asked = false;
        self.unsupported = false;
        let mut current = Current::default();
        current.source.clone_from(&self.source);
        self.published.send_replace(current);
    }

    /// Follows the source on its server as it is now: subscribed where it can be, else
    /// refreshed; waits for a server that is not connected.
    async fn arm(&mut self) {
        let Some(source) = self.source.clone() else {
            return self.set(Following::Waiting);
        };
        let Ok(connection) = self.servers.connection(&source.server) else {
            return self.set(Following::Waiting);
        };
        if !connection.capabilities().resources_subscribe() {
            if !std::mem::replace(&mut self.unsupported, true) {
                let instance = &self.instance;
                subscriptions::instruction_unsupported(instance, &source.server, &source.uri);
            }
            // A refresh already scheduled keeps its time.
            if !matches!(self.following, Following::Refreshing(_)) {
                self.set(Following::Refreshing(Instant::now() + self.refresh));
            }
            return;
        }
        self.unsupported = false;
        self.asked = true;
        let asked = self.servers.subscribe(&source.server, &source.uri, OWNER);
        let answer = timeout(ORDER_WITHIN, asked)
            .await
            .unwrap_or(Err(Refused::Unanswered));
        match answer {
            Ok(()) => {
                self.backoff.reset();
                self.set(Following::Subscribed);
            }
            // Let go: its next task reports the server connected.
            Err(Refused::Gone) => self.set(Following::Waiting),
            Err(refused) => {
                // Pending: the server's task asks again itself; nothing new to say.
                if !matches!(refused, Refused::Pending) {
                    let (instance, err) = (&self.instance, refused.to_string());
                    subscriptions::instruction_fail(instance, &source.server, &source.uri, &err);
                }
                let at = Instant::now() + self.backoff.fail();
                self.set(Following::Retrying(at));
            }
        }
    }

    fn set(&mut self, following: Following) {
        self.following = following;
        let subscribed = following == Following::Subscribed;
        self.published.send_if_modified(|c| {
            let changed = c.subscribed != subscribed;
            c.subscribed = subscribed;
            changed
        });
    }

    /// Reads the instruction again, once its server is connected; a failure keeps the text
    /// read before, and is logged.
    async fn read(&mut self) {
        let Some(source) = self.source.clone() else {
            return;
        };
        if self.servers.connection(&source.server).is_err() {
            // Read once it is connected.
            return;
        }
        match read(&*self.servers, &source).await {
            Ok(text) => {
                self.published.send_modify(|c| {
                    c.text = Some(text);
                    c.read_at_ms = Some(wall_ms());
                });
            }
            Err(e) => {
                let instance = &self.instance;
                own::instruction_read_fail(instance, &source.server, &source.uri, &e.to_string());
            }
        }
    }
}

/// Reads `source` on `servers`: its text, or why it could not be had.
async fn read(servers: &dyn Servers, source: &Source) -> Result<String, Error> {
    let server = &source.server;
    let connection = servers
        .connection(server)
        .map_err(|a| a.into_tool(server))?;
    let read = connection
        .read_resource(&source.uri)
        .await
        .map_err(|e| Error::Server {
            server: server.clone(),
            detail: e.to_string(),
        })?;
    text_of(&source.uri, &read.contents)
}

/// The instruction in `contents` of `uri`: its texts joined by a newline, at most
/// [`TEXT_MAX`] bytes; [`Error::NotText`] for binary contents.
pub(crate) fn text_of(uri: &str, contents: &[ResourceContents]) -> Result<String, Error> {
    let texts: Vec<&str> = contents
        .iter()
        .map(|c| match c {
            ResourceContents::Text { text, .. } => Ok(text.as_str()),
            _ => Err(Error::NotText {
                uri: uri.to_owned(),
            }),
        })
        .collect::<Result<_, _>>()?;
    let text = texts.join("\n");
    match text.len() > TEXT_MAX {
        true => Err(Error::TooLarge {
            what: "instruction",
            size: text.len(),
            max: TEXT_MAX,
        }),
        false => Ok(text),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use agentd_tools::instruction::Instruction as _;
    use mcp_negotiate::Client;
    use mcp_reference_server::{Options, ReferenceServer};
    use serde_json::Value;

    use super::*;
    use crate::agent::servers::Absent;
    use crate::cause::Cause;
    use crate::telemetry::log::tests::capture;

    const COUNTER: &str = "demo://counter";

    /// Server `docs` on one connection, and server `down`, configured and not connected:
    /// each subscribe answers as scripted (then `Ok`); every order is kept with its time.
    #[derive(Debug)]
    struct Fake {
        connection: Arc<Client>,
        answers: Mutex<VecDeque<Result<(), Refused>>>,
        orders: Mutex<Vec<(Instant, &'static str, String)>>,
    }

    impl Fake {
        fn orders(&self, kind: &str) -> Vec<(Instant, String)> {
            let orders = self.orders.lock().unwrap();
            let of = orders.iter().filter(|(_, k, _)| *k == kind);
            of.map(|(at, _, uri)| (*at, uri.clone())).collect()
        }

        fn order(&self, kind: &'static str, uri: &str) {
            let order = (Instant::now(), kind, uri.to_owned());
            self.orders.lock().unwrap().push(order);
        }
    }

    impl Servers for Fake {
        fn connection(&self, server: &str) -> Result<Arc<Client>, Absent> {
            match server {
                "docs" => Ok(self.connection.clone()),
                "down" => Err(Absent::NotConnected),
                _ => Err(Absent::Unknown),
            }
        }

        fn subscribe(&self, _: &str, uri: &str, owner: &str) -> super::super::servers::Answer {
            assert_eq!(owner, OWNER);
            self.order("subscribe", uri);
            let answer = self.answers.lock().unwrap().pop_front().unwrap_or(Ok(()));
            Box::pin(async move { answer })
        }

        fn release(&self, _: &str, uri: &str, _: &str) -> super::super::servers::Answer {
            self.order("release", uri);
            Box::pin(async { Ok(()) })
        }
    }

    /// The reference server with `options`, and `Fake` servers over a connection to it whose
    /// subscribes answer `answers` first.
    async fn fake(
        options: Options,
        answers: Vec<Result<(), Refused>>,
    ) -> (ReferenceServer, Arc<Fake>) {
        let server = ReferenceServer::start(options).await;
        let client = Client::builder("agentd", "0").connect(&server.url()).await;
        let fake = Fake {
            connection: Arc::new(client.expect("connected")),
            answers: Mutex::new(answers.into()),
            orders: Mutex::default(),
        };
        (server, Arc::new(fake))
    }

    fn configured(uri: &str, refresh: Duration) -> config::Instruction {
        config::Instruction {
            server: "docs".into(),
            uri: uri.into(),
            refresh,
        }
    }

    fn start(fake: &Arc<Fake>, config: Option<&config::Instruction>) -> Instruction {
        let tasks = TaskTracker::new();
        let servers: Arc<dyn Servers> = fake.clone();
        Instruction::start("t", config, servers, &tasks, CancellationToken::new())
    }

    /// Waits, at most a (virtual) minute, until the instruction is as `until` says.
    async fn until(instruction: &Instruction, what: &str, until: impl Fn(&Current) -> bool) {
        let mut changes = instruction.changes();
        let held = timeout(Duration::from_secs(60), changes.wait_for(until)).await;
        held.unwrap_or_else(|_| panic!("{what}: {:?}", instruction.current()))
            .expect("the task runs");
    }

    /// Once every note sent before is taken, and the reads they asked for made: a switch to
    /// a server not configured is answered after them, and changes nothing.
    async fn settled(instruction: &Instruction) {
        let refused = instruction.follow(Some("nope"), COUNTER).await;
        assert_eq!(refused.unwrap_err().code(), "not_found");
    }

    fn text(text: &str) -> impl Fn(&Current) -> bool + '_ {
        move |c| c.text.as_deref() == Some(text)
    }

    /// agentd's lines of `event` captured so far, as JSON.
    fn lines(written: &Mutex<Vec<String>>, event: &str) -> Vec<Value> {
        let written = written.lock().unwrap();
        let lines = written
            .iter()
            .map(|l| serde_json::from_str::<Value>(l).unwrap());
        lines.filter(|l| l["event"] == event).collect()
    }

    #[test]
    fn the_text_is_the_texts_joined_within_the_bound() {
        let text = |t: &str| ResourceContents::Text {
            uri: "u".into(),
            mime_type: None,
            text: t.into(),
            meta: None,
        };
        assert_eq!(text_of("u", &[text("a"), text("b")]), Ok("a\nb".into()));
        assert_eq!(text_of("u", &[]), Ok(String::new()));
        let at = "x".repeat(TEXT_MAX);
        assert_eq!(text_of("u", &[text(&at)]).map(|t| t.len()), Ok(TEXT_MAX));
        // The newline counts: at the bound, and one past it.
        let joined = text_of("u", &[text(&at[1..]), text("")]).unwrap();
        assert_eq!(joined.len(), TEXT_MAX);
        let past = text_of("u", &[text(&at), text("")]);
        let too_large = Error::TooLarge {
            what: "instruction",
            size: TEXT_MAX + 1,
            max: TEXT_MAX,
        };
        assert_eq!(past, Err(too_large));
        let blob = ResourceContents::Blob {
            uri: "u".into(),
            mime_type: None,
            blob: "AA==".into(),
            meta: None,
        };
        let err = text_of("u", &[text("a"), blob]).unwrap_err();
        assert_eq!(err, Error::NotText { uri: "u".into() });
    }

    /// In virtual time: a subscribe that fails is logged and asked for again 1 s, 2 s and
    /// 4 s later (a pending one is not logged); once taken, the instruction is read again.
    #[tokio::test(start_paused = true)]
    async fn a_failed_subscribe_is_asked_again_on_its_schedule() {
        let busy = || Err(Refused::Failed(Cause::new(std::io::Error::other("busy"))));
        let answers = vec![busy(), busy(), Err(Refused::Pending), Ok(())];
        let (server, fake) = fake(Options::default(), answers).await;
        let (_guard, written) = capture();
        let config = configured(COUNTER, Duration::from_secs(300));
        // Connected from the start: asked for at once.
        let instruction = start(&fake, Some(&config));
        until(&instruction, "read", text("0")).await;
        server.touch(COUNTER).await;
        until(&instruction, "subscribed", |c| c.subscribed).await;
        // Read again once subscribed: the change made meanwhile is seen.
        until(&instruction, "read again", text("1")).await;
        let asked: Vec<Instant> = fake.orders("subscribe").iter().map(|o| o.0).collect();
        assert_eq!(asked.len(), 4, "{asked:?}");
        let waits: Vec<Duration> = asked.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(waits, [1, 2, 4].map(Duration::from_secs));
        let failed = lines(&written, "instruction.subscribe.fail");
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert_eq!(
            (
                &failed[0]["level"],
                &failed[0]["server"],
                &failed[0]["uri"],
                &failed[0]["err"]
            ),
            (
                &Value::from("warn"),
                &Value::from("docs"),
                &Value::from(COUNTER),
                &Value::from("busy")
            )
        );
        assert!(lines(&written, "instruction.subscribe.unsupported").is_empty());
        // Dialed again: asked for again (the server's task keeps it), and read again.
        server.touch(COUNTER).await;
        instruction.connected("docs");
        until(&instruction, "read at the dial", text("2")).await;
        assert_eq!(fake.orders("subscribe").len(), 5);
    }

    /// In virtual time: a server without subscriptions is logged once and the instruction
    /// read again every refresh.
    #[tokio::test(start_paused = true)]
    async fn a_server_without_subscriptions_is_followed_by_its_refresh() {
        let mut options = Options::default();
        options.subscribe = false;
        let (server, fake) = fake(options, vec![]).await;
        let (_guard, written) = capture();
        let refresh = Duration::from_secs(30);
        let instruction = start(&fake, Some(&configured(COUNTER, refresh)));
        until(&instruction, "read", text("0")).await;
        let read = Instant::now();
        server.touch(COUNTER).await;
        // Dialed again: read again at once, the refresh keeping its time.
        instruction.connected("docs");
        until(&instruction, "refreshed", text("1")).await;
        assert_eq!(Instant::now(), read, "read at the dial");
        server.touch(COUNTER).await;
        until(&instruction, "refreshed", text("2")).await;
        assert_eq!(Instant::now() - read, refresh);
        server.touch(COUNTER).await;
        until(&instruction, "refreshed again", text("3")).await;
        assert_eq!(Instant::now() - read, refresh * 2);
        assert!(!instruction.current().subscribed);
        assert!(fake.orders("subscribe").is_empty());
        let unsupported = lines(&written, "instruction.subscribe.unsupported");
        assert_eq!(unsupported.len(), 1, "{unsupported:?}");
        assert_eq!(
            (
                &unsupported[0]["level"],
                &unsupported[0]["server"],
                &unsupported[0]["uri"]
            ),
            (
                &Value::from("info"),
                &Value::from("docs"),
                &Value::from(COUNTER)
            )
        );
    }

    /// Updates of the followed URI, missed updates and events read it again; another
    /// source is followed once read, the old one released; a read that fails changes
    /// nothing.
    #[tokio::test]
    async fn updates_events_and_switches() {
        let (server, fake) = fake(Options::default(), vec![]).await;
        let (_guard, written) = capture();
        let instruction = start(&fake, Some(&configured(COUNTER, Duration::from_secs(300))));
        assert_eq!(instruction.system(), None, "not read yet");
        instruction.connected("docs");
        settled(&instruction).await;
        assert_eq!(
            instruction.system(),
            Some(Message::System { text: "0".into() })
        );
        assert!(instruction.current().subscribed);
        let read = |what: &str| {
            let current = instruction.current();
            assert_eq!(current.text.as_deref(), Some(what), "{current:?}");
        };
        server.touch(COUNTER).await;
        instruction.updated("docs", "demo://greeting");
        instruction.updated("other", COUNTER);
        settled(&instruction).await;
        read("0");
        instruction.updated("docs", COUNTER);
        settled(&instruction).await;
        read("1");
        server.touch(COUNTER).await;
        instruction.missed();
        settled(&instruction).await;
        read("2");
        server.touch(COUNTER).await;
        instruction.event("tickets", "ticket.created");
        settled(&instruction).await;
        read("3");
        let events = lines(&written, "instruction.event");
        assert_eq!(events.len(), 1);
        assert_eq!(
            (&events[0]["server"], &events[0]["event_type"]),
            (&Value::from("tickets"), &Value::from("ticket.created"))
        );

        // Switches: refused ones change nothing.
        let before = instruction.current();
        let unknown = instruction.follow(Some("nope"), "demo://greeting").await;
        assert_eq!(unknown.unwrap_err().code(), "not_found");
        let down = instruction.follow(Some("down"), "demo://greeting").await;
        assert_eq!(down.unwrap_err().code(), "not_connected");
        let missing = instruction.follow(None, "demo://missing").await;
        assert_eq!(missing.unwrap_err().code(), "server");
        assert_eq!(instruction.current(), before);
        let followed = instruction.follow(None, "demo://greeting").await.unwrap();
        assert_eq!(
            followed.source,
            Some(Source::new("docs", "demo://greeting"))
        );
        assert_eq!(followed.text.as_deref(), Some("hello"));
        assert!(followed.subscribed);
        assert_eq!(instruction.current(), followed);
        let released: Vec<String> = fake.orders("release").into_iter().map(|o| o.1).collect();
        assert_eq!(released, [COUNTER]);
        // The old URI's updates are not the instruction's any more.
        instruction.updated("docs", COUNTER);
        instruction.updated("docs", "demo://greeting");
        let mut changes = instruction.changes();
        changes.borrow_and_update();
        timeout(Duration::from_secs(5), changes.changed())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(instruction.current().text.as_deref(), Some("hello"));
        assert!(lines(&written, "instruction.read.fail").is_empty());
    }

    #[tokio::test]
    async fn the_instruction_keeps_the_contract() {
        let (_server, fake) = fake(Options::default(), vec![]).await;
        let instruction = start(&fake, None);
        let greeting = "demo://greeting";
        agentd_tools::testing::check_instruction(&instruction, "docs", greeting, "hello").await;
    }

    /// A reload naming another source follows it, its text unknown until read; the same
    /// `[instruction]` keeps what `instruction.subscribe` chose; none follows nothing.
    #[tokio::test]
    async fn a_reload_switches_the_source() {
        let (_server, fake) = fake(Options::default(), vec![]).await;
        let config = configured(COUNTER, Duration::from_secs(300));
        let instruction = start(&fake, Some(&config));
        instruction.connected("docs");
        until(&instruction, "read", text("0")).await;
        instruction.follow(None, "demo://greeting").await.unwrap();
        instruction.reload(Some(&config));
        let greeting = Source::new("docs", "demo://greeting");
        let same = |c: &Current| c.source.as_ref() == Some(&greeting);
        until(&instruction, "kept", same).await;
        let mut other = config.clone();
        other.uri = "demo://item/7".into();
        instruction.reload(Some(&other));
        until(&instruction, "switched", text("item 7")).await;
        assert_eq!(
            instruction.current().source,
            Some(Source::new("docs", "demo://item/7"))
        );
        instruction.reload(None);
        until(&instruction, "nothing", |c| c.source.is_none()).await;
        assert_eq!(instruction.current(), Current::default());
        let released: Vec<String> = fake.orders("release").into_iter().map(|o| o.1).collect();
        assert_eq!(released, [COUNTER, "demo://greeting", "demo://item/7"]);
    }
}
