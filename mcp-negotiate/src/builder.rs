//! What a client says about itself and how it behaves, set once and used for every dial.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use mcp_transport::driver::{ClientFeatures, Config, Elicitor, Unserved};
use mcp_wire::{ElicitAction, ElicitRequestParams, ElicitResult, Implementation, Root};

use crate::{Client, Dialer, Error, Recovery, Start};

/// How long a person has to answer a server's question by default; then the answer is
/// cancel.
pub const DEFAULT_ELICITATION_TIMEOUT: Duration = Duration::from_secs(300);

/// Builds a [`Client`]: the client's identity, the features it declares, and its bounds.
///
/// | setting | default |
/// |---|---|
/// | `clientInfo` | the name and version given, no title |
/// | capabilities | none: elicitation is declared only with [`ClientBuilder::elicitation`], roots only with [`ClientBuilder::roots`] |
/// | [`timeout`](ClientBuilder::timeout) | 60 s of silence on a request |
/// | [`elicitation_timeout`](ClientBuilder::elicitation_timeout) | 300 s, then the answer is cancel |
/// | [`recovery`](ClientBuilder::recovery) | [`Recovery::AtOnce`] |
/// | [`list_tools`](ClientBuilder::list_tools) | yes, at connect, when the server declares `tools` |
/// | [`unserved_requests`](ClientBuilder::unserved_requests) | a server request no declared feature serves is answered -32601 |
/// | [`header`](ClientBuilder::header) | none |
///
/// ```no_run
/// # async fn run() -> Result<(), mcp_negotiate::Error> {
/// use std::time::Duration;
/// use mcp_negotiate::Client;
/// use mcp_wire::{ElicitAction, ElicitRequestParams, ElicitResult};
///
/// let client = Client::builder("my-app", "1.0.0")
///     .title("My App")
///     .timeout(Duration::from_secs(30))
///     .header("Authorization", "Bearer secret")
///     .elicitation(|_: ElicitRequestParams| async { ElicitResult::new(ElicitAction::Decline) })
///     .connect("http://127.0.0.1:8765/mcp")
///     .await?;
/// # let _ = client; Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct ClientBuilder {
    info: Implementation,
    config: Config,
    elicitor: Option<Arc<dyn Elicitor>>,
    elicitation_timeout: Duration,
    roots: Option<Vec<Root>>,
    unserved: Unserved,
    recovery: Recovery,
    list_tools: bool,
}

impl Client {
    /// Starts building a client that names itself `name` at `version` in `clientInfo`.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            info: Implementation::new(name, version),
            config: Config::default(),
            elicitor: None,
            elicitation_timeout: DEFAULT_ELICITATION_TIMEOUT,
            roots: None,
            unserved: Unserved::MethodNotFound,
            recovery: Recovery::AtOnce,
            list_tools: true,
        }
    }
}

impl ClientBuilder {
    /// `clientInfo.title`, a name for people.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.info.title = Some(title.into());
        self
    }

    /// The longest silence on a request before it fails (the bound restarts on every byte,
    /// so a call reporting progress is never cut off); also bounds each step of the
    /// negotiation.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.config.silence = timeout;
        self
    }

    /// A header sent on every request (e.g. `Authorization`). The headers the client sets
    /// itself are refused when the client is built.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.headers.push((name.into(), value.into()));
        self
    }

    /// The transport's whole configuration (headers, body bounds, silence, trusted CAs). It
    /// replaces what [`ClientBuilder::timeout`] and [`ClientBuilder::header`] set before it:
    /// call it first, and those after it.
    pub fn transport(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Declares elicitation (form mode), answered by `elicitor`: a closure
    /// `Fn(ElicitRequestParams) -> impl Future<Output = ElicitResult>`, or any [`Elicitor`].
    /// Without one, nothing is declared and an `input_required` elicitation is answered
    /// cancel.
    pub fn elicitation(mut self, elicitor: impl Elicitor + 'static) -> Self {
        self.elicitor = Some(Arc::new(elicitor));
        self
    }

    /// How long the elicitation handler has for one answer; then the answer is cancel.
    pub fn elicitation_timeout(mut self, bound: Duration) -> Self {
        self.elicitation_timeout = bound;
        self
    }

    /// Declares roots and answers `roots/list` with `roots`.
    pub fn roots(mut self, roots: Vec<Root>) -> Self {
        self.roots = Some(roots);
        self
    }

    /// What becomes of a server request on a legacy stream that no declared feature serves:
    /// answered -32601 (the default), or dropped.
    pub fn unserved_requests(mut self, unserved: Unserved) -> Self {
        self.unserved = unserved;
        self
    }

    /// What a connection does when the server loses its legacy session.
    pub fn recovery(mut self, recovery: Recovery) -> Self {
        self.recovery = recovery;
        self
    }

    /// Whether a connection lists the server's tools at connect (only ever when the server
    /// declares `tools`). Without the listing, [`Client::catalog`] is empty until
    /// [`Client::refresh_tools`], and so a 2026-07-28 call carries no `Mcp-Param-*` header
    /// (they come from the tool's schema in the catalogue): a server that routes on them
    /// refuses the call.
    pub fn list_tools(mut self, list: bool) -> Self {
        self.list_tools = list;
        self
    }

    /// A [`Dialer`] of `url`: the HTTP client (one pool) and everything set here, to
    /// connect with as often as needed. Fails when the URL or a header is refused.
    pub fn dialer(self, url: &str) -> Result<Dialer, Error> {
        let mut features = ClientFeatures::none().with_unserved(self.unserved);
        if let Some(elicitor) = self.elicitor {
            features = features.with_elicitor(Arc::new(Bounded {
                elicitor,
                bound: self.elicitation_timeout,
            }));
        }
        if let Some(roots) = self.roots {
            features = features.with_roots(roots);
        }
        Ok(Dialer::new(
            url,
            self.config,
            self.info,
            features,
            self.recovery,
            self.list_tools,
        )?)
    }

    /// Connects to `url`: negotiates (`server/discover` first, `initialize` as the
    /// fallback) and lists the tools, as set. The future does not borrow `url`.
    pub fn connect(self, url: &str) -> impl Future<Output = Result<Client, Error>> + Send + use<> {
        self.connect_with(url, Start::Probe)
    }

    /// As [`ClientBuilder::connect`], starting as `start` says (the way another connection
    /// to the same server got there).
    pub fn connect_with(
        self,
        url: &str,
        start: Start,
    ) -> impl Future<Output = Result<Client, Error>> + Send + use<> {
        let dialer = self.dialer(url);
        async move { Client::connect_with(dialer?, start).await }
    }
}

/// An elicitation handler given at most `bound`: then the answer is cancel.
#[derive(Debug)]
struct Bounded {
    elicitor: Arc<dyn Elicitor>,
    bound: Duration,
}

impl Elicitor for Bounded {
    fn elicit(
        &self,
        params: ElicitRequestParams,
    ) -> Pin<Box<dyn Future<Output = ElicitResult> + Send + '_>> {
        Box::pin(async move {
            tokio::time::timeout(self.bound, self.elicitor.elicit(params))
                .await
                .unwrap_or_else(|_| ElicitResult::new(ElicitAction::Cancel))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn silent(_: ElicitRequestParams) -> std::future::Pending<ElicitResult> {
        std::future::pending()
    }

    #[tokio::test(start_paused = true)]
    async fn a_person_has_the_elicitation_timeout_then_the_answer_is_cancel() {
        let params: ElicitRequestParams = serde_json::from_value(serde_json::json!({
            "message": "Name?", "requestedSchema": {"type": "object"}
        }))
        .unwrap();
        for bound in [DEFAULT_ELICITATION_TIMEOUT, Duration::from_secs(7)] {
            let started = tokio::time::Instant::now();
            let bounded = Bounded {
                elicitor: Arc::new(silent),
                bound,
            };
            let answer = bounded.elicit(params.clone()).await;
            assert_eq!(answer.action, ElicitAction::Cancel);
            assert_eq!(started.elapsed(), bound);
        }
        assert_eq!(DEFAULT_ELICITATION_TIMEOUT, Duration::from_secs(300));
    }

    /// The bound set on the builder is the one the dialer's elicitations are given.
    #[tokio::test(start_paused = true)]
    async fn the_builders_elicitation_timeout_bounds_the_dialers_handler() {
        let dialer = Client::builder("my-app", "1.0")
            .elicitation(silent)
            .elicitation_timeout(Duration::from_secs(7))
            .dialer("http://127.0.0.1:9/mcp")
            .unwrap();
        let params = mcp_wire::RawJson::from_text(
            r#"{"message": "Name?", "requestedSchema": {"type": "object"}}"#,
        )
        .unwrap();
        let started = tokio::time::Instant::now();
        let answer = dialer
            .features()
            .answer("elicitation/create", Some(&params))
            .await;
        assert_eq!(
            answer,
            Some(mcp_transport::driver::Answer::Elicitation(
                ElicitResult::new(ElicitAction::Cancel)
            ))
        );
        assert_eq!(started.elapsed(), Duration::from_secs(7));
    }

    #[test]
    fn the_builder_declares_what_it_serves_and_nothing_else() {
        let url = "http://127.0.0.1:9/mcp";
        let plain = Client::builder("my-app", "1.0").dialer(url).unwrap();
        assert_eq!(plain.capabilities().as_map().len(), 0);
        assert_eq!(plain.timeout(), Duration::from_secs(60));
        assert_eq!(plain.recovery(), Recovery::AtOnce);
        assert_eq!(plain.client_info().name, "my-app");
        assert_eq!(plain.client_info().title, None);

        let full = Client::builder("my-app", "1.0")
            .title("My App")
            .timeout(Duration::from_secs(5))
            .elicitation(silent)
            .roots(vec![Root::new("file:///src")])
            .recovery(Recovery::ByOwner)
            .dialer(url)
            .unwrap();
        let declared = serde_json::to_value(full.capabilities()).unwrap();
        assert_eq!(
            declared,
            serde_json::json!({"elicitation": {"form": {}}, "roots": {}})
        );
        assert_eq!(full.timeout(), Duration::from_secs(5));
        assert_eq!(full.recovery(), Recovery::ByOwner);
        assert_eq!(full.client_info().title.as_deref(), Some("My App"));
    }

    #[test]
    fn a_header_the_client_sets_itself_is_refused() {
        let refused = Client::builder("my-app", "1.0")
            .header("Mcp-Session-Id", "x")
            .dialer("http://127.0.0.1:9/mcp");
        assert!(matches!(refused, Err(Error::Transport(_))));
    }
}
