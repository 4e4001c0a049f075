//! The HTTP client under both eras: one endpoint, pooled connections, bounded bodies.

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Body as _;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::time::{Instant, Sleep};

use crate::Error;
use crate::headers::{ACCEPT_POST, ACCEPT_STREAM, check_configured};
use crate::reply::Limits;

/// How a transport talks to one server. Its `Debug` shows the headers' names, never their
/// values (they carry credentials).
#[derive(Clone)]
#[non_exhaustive]
pub struct Config {
    /// Headers sent on every request (e.g. `Authorization`). Names the client sets itself
    /// are refused when the transport is built.
    pub headers: Vec<(String, String)>,
    /// Bounds on bodies and events.
    pub limits: Limits,
    /// The longest silence on a request before it fails: the bound restarts on every byte
    /// received, so a call that streams progress is never cut off while it talks.
    pub silence: Duration,
    /// The bound on the POST that carries an answer to a server's request.
    pub answer_timeout: Duration,
    /// How many of a server's requests one stream answers at once through a feature (a
    /// person asked, say): one past them is refused (-32603) at once. As many quick replies
    /// (`ping`, -32601, those refusals) may be under way; past them a request is left
    /// unanswered. The layer above bounds a round of `input_required` requests by it too.
    pub answering_max: usize,
    /// Certificate authorities trusted besides Mozilla's (DER), e.g. a private CA.
    pub extra_roots: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("Config")
            .field("headers", &headers)
            .field("limits", &self.limits)
            .field("silence", &self.silence)
            .field("answer_timeout", &self.answer_timeout)
            .field("answering_max", &self.answering_max)
            .field("extra_roots", &self.extra_roots.len())
            .finish()
    }
}

impl Default for Config {
    /// No headers, default limits, 60 s of silence, 5 s for an answer, 4 answers at once.
    fn default() -> Self {
        Self {
            headers: Vec::new(),
            limits: Limits::default(),
            silence: Duration::from_secs(60),
            answer_timeout: Duration::from_secs(5),
            answering_max: 4,
            extra_roots: Vec::new(),
        }
    }
}

/// The pooled HTTP client of one MCP endpoint. Cheap to clone; clones share the pool.
#[derive(Debug, Clone)]
pub struct HttpClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    endpoint: Uri,
    /// `Host` of an `http` endpoint, made once (`host_value`); `None` leaves it to the pool.
    host: Option<HeaderValue>,
    headers: Arc<HeaderMap>,
    config: Arc<Config>,
}

/// The TLS roots: Mozilla's, bundled (`webpki-roots`), so that a client behaves the same on
/// every machine and needs no system store; plus the configured ones.
fn tls_config(extra: &[Vec<u8>]) -> Result<rustls::ClientConfig, Error> {
    let mut roots = rustls::RootCertStore::from_iter(webpki_roots());
    for der in extra {
        roots
            .add(rustls::pki_types::CertificateDer::from(der.clone()))
            .map_err(|e| Error::InvalidRoot {
                detail: e.to_string(),
            })?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::InvalidRoot {
            detail: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

fn webpki_roots() -> impl Iterator<Item = rustls::pki_types::TrustAnchor<'static>> {
    webpki_roots::TLS_SERVER_ROOTS.iter().cloned()
}

impl HttpClient {
    /// A client of `endpoint` (an `http` or `https` URL). Refuses a configured header that
    /// the client sets itself, naming it, or one that is not valid HTTP.
    pub fn new(endpoint: &str, config: Config) -> Result<Self, Error> {
        let uri: Uri = endpoint.parse().map_err(|_| Error::InvalidUrl {
            url: endpoint.into(),
        })?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(Error::InvalidUrl {
                url: endpoint.into(),
            });
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            check_configured(name)?;
            let invalid = || Error::InvalidHeader { name: name.clone() };
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?;
            let value = HeaderValue::from_str(value).map_err(|_| invalid())?;
            headers.append(header, value);
        }
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(&config.extra_roots)?)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        // Not `http2_only`: a plain `http` endpoint speaks HTTP/1.1 (HTTP/2 is offered only by
        // TLS), which `host_value` relies on.
        let client = Client::builder(TokioExecutor::new()).build(https);
        Ok(Self {
            client,
            host: host_value(&uri, &headers),
            endpoint: uri,
            headers: Arc::new(headers),
            config: Arc::new(config),
        })
    }

    /// The transport's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &Uri {
        &self.endpoint
    }

    /// A request to the endpoint: the configured headers, `Accept`, `Content-Type` when there
    /// is a body, an `http` endpoint's `Host`, then `headers`. Made before
    /// [`HttpClient::send`], so that no header is held across its waits.
    pub(crate) fn request(
        &self,
        method: Method,
        body: Option<Bytes>,
        accept: &'static str,
        headers: impl IntoIterator<Item = (HeaderName, HeaderValue)>,
    ) -> Request<Full<Bytes>> {
        let headers = headers.into_iter();
        let (least, most) = headers.size_hint();
        // Room for every header at once: the configured ones, `Accept`, `Content-Type`, `Host`
        // (set here, or by hyper-util as it sends), `headers`, and the `Content-Length` hyper
        // adds as it writes the request. On a request's usual path the map does not grow,
        // which would rehash it and move its entries every time.
        let mut map = HeaderMap::with_capacity(self.headers.len() + most.unwrap_or(least) + 4);
        map.extend(self.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
        map.insert(ACCEPT, accept_value(accept));
        if body.is_some() {
            map.insert(
                CONTENT_TYPE,
                const { HeaderValue::from_static("application/json") },
            );
        }
        if let Some(host) = &self.host {
            map.insert(HOST, host.clone());
        }
        for (name, value) in headers {
            map.insert(name, value);
        }
        // Made whole rather than through `Request::builder`: nothing here can fail.
        let mut request = Request::new(Full::new(body.unwrap_or_default()));
        *request.method_mut() = method;
        *request.uri_mut() = self.endpoint.clone();
        *request.headers_mut() = map;
        request
    }

    /// Sends a request made by [`HttpClient::request`] and waits for the head of the answer,
    /// at most `silence`.
    pub(crate) async fn send(
        &self,
        request: Request<Full<Bytes>>,
        silence: &mut Silence<'_>,
    ) -> Result<http::Response<Incoming>, Error> {
        match silence.within(self.client.request(request)).await? {
            Ok(response) => Ok(response),
            Err(e) if e.is_connect() => Err(Error::Unreachable {
                detail: error_chain(&e),
            }),
            Err(e) => Err(Error::Broken {
                detail: error_chain(&e),
            }),
        }
    }
}

/// The `Host` of every request to a plain `http` endpoint, as hyper-util would write it (the
/// host, and the port unless it is 80), made once rather than for each request.
/// Such an endpoint's connections are always HTTP/1.1 (HTTP/2 is only offered by TLS), which
/// carries the header; an `https` one may speak HTTP/2, so its `Host` is left to the pool.
/// `None` too when the configuration sets `Host` itself.
fn host_value(endpoint: &Uri, configured: &HeaderMap) -> Option<HeaderValue> {
    if endpoint.scheme_str() != Some("http") || configured.contains_key(HOST) {
        return None;
    }
    let host = endpoint.host()?;
    let value = match endpoint.port_u16() {
        Some(port) if port != 80 => format!("{host}:{port}"),
        _ => host.to_owned(),
    };
    HeaderValue::try_from(value).ok()
}

/// One silence bound over the waits of an exchange (the head, then each piece of the body):
/// a single timer, pushed back as each wait starts. Pushing an armed timer later is a
/// compare-and-swap; arming a fresh one per wait takes the timer wheel's lock.
///
/// The timer is pinned by the caller, on its own stack:
/// `let mut silence = Silence::new(pin!(tokio::time::sleep(bound)), bound);` would drop the
/// timer at once, so it takes two statements.
pub(crate) struct Silence<'a> {
    timer: Pin<&'a mut Sleep>,
    bound: Duration,
    /// No wait has started yet: the timer's first deadline is still the right one.
    fresh: bool,
}

impl<'a> Silence<'a> {
    /// A bound of `bound` on each wait, kept by `timer` (made with `sleep(bound)`).
    pub(crate) fn new(timer: Pin<&'a mut Sleep>, bound: Duration) -> Self {
        Self {
            timer,
            bound,
            fresh: true,
        }
    }

    /// The bound.
    pub(crate) fn bound(&self) -> Duration {
        self.bound
    }

    /// `future`'s output, unless `bound` passes first ([`Error::Silent`]).
    pub(crate) async fn within<F: Future>(&mut self, future: F) -> Result<F::Output, Error> {
        if !std::mem::take(&mut self.fresh) {
            self.timer.as_mut().reset(Instant::now() + self.bound);
        }
        let mut future = pin!(future);
        let bound = self.bound;
        poll_fn(|cx| {
            if let Poll::Ready(output) = future.as_mut().poll(cx) {
                return Poll::Ready(Ok(output));
            }
            self.timer.as_mut().poll(cx).map(|()| Err(silent(bound)))
        })
        .await
    }
}

/// `Accept`: one of the client's own constants, taken as it is, not parsed.
fn accept_value(accept: &'static str) -> HeaderValue {
    match accept {
        ACCEPT_POST => const { HeaderValue::from_static(ACCEPT_POST) },
        ACCEPT_STREAM => const { HeaderValue::from_static(ACCEPT_STREAM) },
        other => HeaderValue::from_static(other),
    }
}

/// Headers given as text, checked and made typed for [`HttpClient::send`]: the client's own
/// names are taken as they are, not parsed.
pub(crate) fn typed(headers: &[(&str, &str)]) -> Result<Vec<(HeaderName, HeaderValue)>, Error> {
    headers
        .iter()
        .map(|(name, value)| {
            let header = match known(name) {
                Some(header) => header,
                None => HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad(name))?,
            };
            Ok((header, HeaderValue::from_str(value).map_err(|_| bad(name))?))
        })
        .collect()
}

/// The headers the client sets on every request, without parsing their names each time.
fn known(name: &str) -> Option<HeaderName> {
    use crate::headers::{
        LAST_EVENT_ID, MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION, MCP_SESSION_ID,
    };
    Some(match name {
        MCP_PROTOCOL_VERSION => names::PROTOCOL_VERSION,
        MCP_METHOD => names::METHOD,
        MCP_NAME => names::NAME,
        MCP_SESSION_ID => const { HeaderName::from_static("mcp-session-id") },
        LAST_EVENT_ID => const { HeaderName::from_static("last-event-id") },
        _ => return None,
    })
}

/// The names of the headers every 2026-07-28 request carries, ready.
pub(crate) mod names {
    use http::HeaderName;

    /// `MCP-Protocol-Version`.
    pub(crate) const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
    /// `Mcp-Method`.
    pub(crate) const METHOD: HeaderName = HeaderName::from_static("mcp-method");
    /// `Mcp-Name`.
    pub(crate) const NAME: HeaderName = HeaderName::from_static("mcp-name");
}

fn bad(name: &str) -> Error {
    Error::InvalidHeader { name: name.into() }
}

pub(crate) fn silent(bound: Duration) -> Error {
    Error::Silent {
        after_ms: u64::try_from(bound.as_millis()).unwrap_or(u64::MAX),
    }
}

/// An error and its sources, joined: hyper's own message is often just "client error".
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Reads the next piece of a body, waiting at most `silence`; `None` at its end.
pub(crate) async fn next_chunk(
    body: &mut Incoming,
    silence: Option<Duration>,
) -> Result<Option<Bytes>, Error> {
    match silence {
        Some(bound) => {
            let timer = pin!(tokio::time::sleep(bound));
            next_piece(body, Some(&mut Silence::new(timer, bound))).await
        }
        None => next_piece(body, None).await,
    }
}

/// Reads the next piece of a body, each frame within `silence`; `None` at its end.
async fn next_piece(
    body: &mut Incoming,
    mut silence: Option<&mut Silence<'_>>,
) -> Result<Option<Bytes>, Error> {
    loop {
        let frame = match silence.as_deref_mut() {
            Some(silence) => silence.within(body.frame()).await?,
            None => body.frame().await,
        };
        match frame {
            None => return Ok(None),
            Some(Err(e)) => {
                return Err(Error::Broken {
                    detail: error_chain(&e),
                });
            }
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    return Ok(Some(data));
                }
            }
        }
    }
}

/// Reads a whole body, stopping past `limit` bytes (the caller sees a body of `limit + 1`
/// bytes, which the decoder refuses as too large).
pub(crate) async fn read_body(
    body: &mut Incoming,
    limit: usize,
    silence: &mut Silence<'_>,
) -> Result<Bytes, Error> {
    let mut first: Option<Bytes> = None;
    let mut rest: Vec<u8> = Vec::new();
    while let Some(chunk) = next_piece(body, Some(&mut *silence)).await? {
        match first.take() {
            None if rest.is_empty() => first = Some(chunk),
            Some(f) => {
                rest.extend_from_slice(&f);
                rest.extend_from_slice(&chunk);
            }
            None => rest.extend_from_slice(&chunk),
        }
        let len = first.as_ref().map_or(rest.len(), Bytes::len);
        // Past the bound, or at the end the length announced: no need to wait for more.
        if len > limit || body.is_end_stream() {
            break;
        }
    }
    Ok(match first {
        Some(only) => only,
        None => Bytes::from(rest),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_header_names_never_values() {
        let config = Config {
            headers: vec![("Authorization".into(), "Bearer s3cret".into())],
            ..Config::default()
        };
        let shown = format!("{config:?}");
        assert!(shown.contains("Authorization"), "{shown}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    /// A request to an `http` endpoint carries its `Host`, made once, as the pool would
    /// write it; an `https` one's, or one configured, is left to the pool.
    #[test]
    fn an_http_request_carries_its_host() {
        let host = |url: &str, headers: Vec<(String, String)>| {
            let client = HttpClient::new(
                url,
                Config {
                    headers,
                    ..Config::default()
                },
            )
            .expect("a client");
            let request = client.request(Method::POST, Some(Bytes::new()), ACCEPT_POST, []);
            request
                .headers()
                .get(HOST)
                .map(|v| v.to_str().expect("text").to_owned())
        };
        assert_eq!(
            host("http://127.0.0.1:8080/mcp", vec![]).as_deref(),
            Some("127.0.0.1:8080")
        );
        assert_eq!(
            host("http://localhost:80/mcp", vec![]).as_deref(),
            Some("localhost")
        );
        assert_eq!(host("http://[::1]:9/", vec![]).as_deref(), Some("[::1]:9"));
        assert_eq!(host("https://127.0.0.1:8443/mcp", vec![]), None);
        let configured = vec![("Host".to_owned(), "example.test".to_owned())];
        assert_eq!(
            host("http://127.0.0.1:8080/mcp", configured).as_deref(),
            Some("example.test")
        );
    }

    /// One timer serves every wait of an exchange: each wait has the whole bound, from its
    /// own start, however long the earlier ones took (virtual time).
    #[tokio::test(start_paused = true)]
    async fn the_silence_bound_restarts_at_each_wait() {
        let bound = Duration::from_millis(300);
        let timer = pin!(tokio::time::sleep(bound));
        let mut silence = Silence::new(timer, bound);
        let start = Instant::now();
        for _ in 0..3 {
            let wait = tokio::time::sleep(Duration::from_millis(250));
            assert_eq!(silence.within(wait).await, Ok(()));
        }
        assert_eq!(start.elapsed(), Duration::from_millis(750));
        let silent = silence.within(std::future::pending::<()>()).await;
        assert_eq!(silent, Err(Error::Silent { after_ms: 300 }));
        assert_eq!(start.elapsed(), Duration::from_millis(1050));
    }
}
