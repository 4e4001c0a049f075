//! The OpenAI-compatible Chat Completions provider: `POST {base_url}/chat/completions` over
//! hyper (a pooled HTTP/1.1 and HTTP/2 client, TLS through rustls with Mozilla's roots),
//! its answer streamed and read as it arrives ([`wire`](super::wire)), failed tries asked
//! again as the [`Retry`] policy says ([`retry`](super::retry)), the whole within the
//! completion's deadline.

use std::fmt;
use std::time::SystemTime;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER, USER_AGENT};
use hyper::{Method, Request as HttpRequest, Response, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::time::Instant;

use super::retry::{self, Backoff, Retry};
use super::wire::{self, Answer};
use super::{Model, ModelError, Reply, Request};
use crate::cause::Cause;
use crate::config;

/// The most an answer may hold, in bytes (its body, streamed or not): past it the answer
/// is refused ([`ModelError::Decode`]) and no more of it is read.
pub(crate) const ANSWER_MAX: usize = 8 << 20;

/// The most of an error answer's body read for its detail.
const DETAIL_MAX: usize = 200;

/// The provider of one `[model]`. Cheap to share: its connections are pooled. Its `Debug`
/// never shows the API key.
pub(crate) struct Chat {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    endpoint: Uri,
    authorization: Option<HeaderValue>,
    model: String,
    max_output_tokens: Option<u64>,
    retry: Retry,
    random: fn() -> u32,
}

impl fmt::Debug for Chat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chat")
            .field("endpoint", &self.endpoint)
            .field("model", &self.model)
            .field("api_key", &self.authorization.is_some())
            .field("max_output_tokens", &self.max_output_tokens)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl Chat {
    /// The provider of `model` (validated by the configuration), retrying as `retry` says,
    /// its backoffs jittered by `random` (the daemon's is [`crate::clock::random`]).
    pub(crate) fn new(
        model: &config::Model,
        retry: Retry,
        random: fn() -> u32,
    ) -> Result<Self, ModelError> {
        let url = format!("{}/chat/completions", model.base_url.trim_end_matches('/'));
        let endpoint: Uri = url.parse().map_err(|e| ModelError::Transport {
            detail: format!("{url:?} is not a URL: {e}"),
            source: Some(Cause::new(e)),
        })?;
        let authorization = match &model.api_key {
            None => None,
            Some(key) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|e| {
                    ModelError::Transport {
                        detail: "the API key is not a valid HTTP header value".to_owned(),
                        source: Some(Cause::new(e)),
                    }
                })?;
                value.set_sensitive(true);
                Some(value)
            }
        };
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(ModelError::transport)?
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(https),
            endpoint,
            authorization,
            model: model.model.clone(),
            max_output_tokens: model.max_output_tokens,
            retry,
            random,
        })
    }

    /// Tries until an answer is had, a failure is not retried, or the retries stop.
    async fn tries(&self, body: Bytes, deadline: Instant) -> Result<Reply, ModelError> {
        let mut backoff = Backoff::new(self.retry);
        loop {
            let (error, retry_after) = match self.try_once(body.clone()).await {
                Try::Done(outcome) => return outcome,
                Try::Failed { error, retry_after } => (error, retry_after),
            };
            let now = Instant::now();
            match backoff.next(now, deadline, retry_after, (self.random)()) {
                Some(at) => tokio::time::sleep_until(at).await,
                None => return Err(error),
            }
        }
    }

    /// One try: the request sent, its answer read.
    async fn try_once(&self, body: Bytes) -> Try {
        let response = match self.client.request(self.request(body)).await {
            Ok(response) => response,
            // No answer came: it is asked again.
            Err(e) => {
                return Try::Failed {
                    error: ModelError::transport(e),
                    retry_after: None,
                };
            }
        };
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Try::Done(read(response).await);
        }
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| retry::retry_after(v, SystemTime::now()));
        let error = ModelError::Status {
            status,
            detail: detail(response.into_body()).await,
        };
        match retry::is_retried(status) {
            true => Try::Failed { error, retry_after },
            false => Try::Done(Err(error)),
        }
    }

    /// The HTTP request carrying `body`.
    fn request(&self, body: Bytes) -> HttpRequest<Full<Bytes>> {
        let mut request = HttpRequest::new(Full::new(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.endpoint.clone();
        let headers = request.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("text/event-stream, application/json"),
        );
        headers.insert(
            USER_AGENT,
            HeaderValue::from_static(concat!("agentd/", env!("CARGO_PKG_VERSION"))),
        );
        if let Some(authorization) = &self.authorization {
            headers.insert(AUTHORIZATION, authorization.clone());
        }
        request
    }
}

impl Model for Chat {
    async fn complete(
        &self,
        request: &Request<'_>,
        deadline: Instant,
    ) -> Result<Reply, ModelError> {
        let body = wire::body(request, &self.model, self.max_output_tokens);
        tokio::time::timeout_at(deadline, self.tries(Bytes::from(body), deadline))
            .await
            .unwrap_or(Err(ModelError::Deadline))
    }
}

/// How one try ended.
enum Try {
    /// With the completion's outcome: an answer, or a failure not retried.
    Done(Result<Reply, ModelError>),
    /// With a failure that is retried, after the server's `Retry-After` if it named one.
    Failed {
        error: ModelError,
        retry_after: Option<std::time::Duration>,
    },
}

/// Reads a successful answer: an event stream, or one JSON object; at most
/// [`ANSWER_MAX`] bytes.
async fn read(response: Response<Incoming>) -> Result<Reply, ModelError> {
    let streamed = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    let mut answer = Answer::new(streamed, ANSWER_MAX);
    let mut body = response.into_body();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(ModelError::transport)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if answer.push(&data)? {
            break;
        }
    }
    answer.finish()
}

/// The start of an error answer's body, at most [`DETAIL_MAX`] bytes, trimmed; what was
/// read when the body breaks.
async fn detail(mut body: Incoming) -> String {
    let mut read = Vec::new();
    while read.len() < DETAIL_MAX {
        let Some(Ok(frame)) = body.frame().await else {
            break;
        };
        if let Ok(data) = frame.into_data() {
            read.extend_from_slice(&data);
        }
    }
    let mut end = read.len().min(DETAIL_MAX);
    let text = loop {
        // Cut where UTF-8 allows: at most three bytes back.
        match std::str::from_utf8(&read[..end]) {
            Ok(text) => break text.to_owned(),
            Err(e) if e.error_len().is_none() => end = e.valid_up_to(),
            Err(_) => break String::from_utf8_lossy(&read[..end]).into_owned(),
        }
    };
    text.trim().to_owned()
}
