//! What every result shares: `resultType`, the caching fields, `input_required` interim
//! results, and the empty result.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{ElicitRequestParams, ElicitResult, Error, ListRootsResult, Meta, RawJson, method};

/// A result's `resultType` (2026-07-28). A missing one (a legacy server) reads as
/// [`ResultType::Complete`]; a value this crate does not know is refused when decoding, since
/// no extension this crate knows adds one.
///
/// ```
/// use mcp_wire::ResultType;
///
/// assert_eq!(serde_json::from_str::<ResultType>(r#""input_required""#).unwrap(), ResultType::InputRequired);
/// assert!(serde_json::from_str::<ResultType>(r#""task""#).is_err());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResultType {
    /// A final result.
    #[default]
    Complete,
    /// An interim result asking the client for input before a retry.
    InputRequired,
}

/// Who may share a cacheable result (`cacheScope`, 2026-07-28).
///
/// The field is read so that it survives, and a value this crate
/// does not know reads as [`CacheScope::Private`], the narrower scope.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CacheScope {
    /// Any client may reuse the result.
    Public,
    /// Only the same authorization context may reuse the result.
    #[default]
    Private,
}

impl Serialize for CacheScope {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(match self {
            Self::Public => "public",
            Self::Private => "private",
        })
    }
}

impl<'de> Deserialize<'de> for CacheScope {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(if s == "public" {
            Self::Public
        } else {
            Self::Private
        })
    }
}

/// The caching members of a cacheable result, read with their defaults: a missing `ttlMs`
/// or a negative one is 0, a missing `cacheScope` is private.
pub(crate) fn ttl_ms(raw: Option<i64>) -> u64 {
    raw.map_or(0, |t| u64::try_from(t).unwrap_or(0))
}

/// A result with nothing in it but perhaps `_meta`: the answer to `ping`,
/// `resources/subscribe`, `resources/unsubscribe`, and a listen's final result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct EmptyResult {
    /// `resultType`, when the server sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The answer to a request that may need input first (`tools/call`, `prompts/get`,
/// `resources/read` in 2026-07-28): the final result, or an interim one.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<T> {
    /// The final result.
    Complete(T),
    /// The server needs input; answer it and send the request again.
    InputRequired(InputRequired),
}

impl<T> Outcome<T> {
    /// The outcome of a result read from the wire: interim when its `resultType` says so,
    /// else what `complete` builds. `_meta` goes to whichever it is.
    pub(crate) fn read<E>(
        result_type: Option<ResultType>,
        input_requests: Option<BTreeMap<String, InputRequest>>,
        request_state: Option<String>,
        meta: Option<Meta>,
        complete: impl FnOnce(Option<Meta>) -> Result<T, E>,
    ) -> Result<Self, E> {
        match result_type {
            Some(ResultType::InputRequired) => Ok(Self::InputRequired(InputRequired::new(
                input_requests,
                request_state,
                meta,
            ))),
            _ => complete(meta).map(Self::Complete),
        }
    }
}

impl<T: Serialize> Serialize for Outcome<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Complete(t) => t.serialize(serializer),
            Self::InputRequired(i) => i.serialize(serializer),
        }
    }
}

/// An `input_required` result (SEP-2322): what the server asks for, and the state to echo.
///
/// ```
/// use mcp_wire::InputRequired;
///
/// let r: InputRequired = serde_json::from_str(r#"{"resultType":"input_required",
///   "inputRequests":{"login":{"method":"elicitation/create",
///     "params":{"message":"Your login?","requestedSchema":{"type":"object"}}}},
///   "requestState":"opaque=="}"#).unwrap();
/// let ask = r.input_requests.as_ref().unwrap()["login"].elicitation().unwrap().unwrap();
/// assert_eq!(ask.message, "Your login?");
/// assert_eq!(r.request_state.as_deref(), Some("opaque=="));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct InputRequired {
    /// Always [`ResultType::InputRequired`] on the wire.
    #[serde(default = "input_required", skip_deserializing)]
    result_type: ResultType,
    /// What the server asks for, by key; the retry answers each key in `inputResponses`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<BTreeMap<String, InputRequest>>,
    /// Opaque state to echo on the retry, byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

fn input_required() -> ResultType {
    ResultType::InputRequired
}

impl InputRequired {
    /// An interim result with these requests and state.
    pub fn new(
        input_requests: Option<BTreeMap<String, InputRequest>>,
        request_state: Option<String>,
        meta: Option<Meta>,
    ) -> Self {
        Self {
            result_type: ResultType::InputRequired,
            input_requests,
            request_state,
            meta,
        }
    }
}

/// One input request inside an `input_required` result: a method and its params, without
/// `jsonrpc` or `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct InputRequest {
    /// `elicitation/create`, `sampling/createMessage` or `roots/list`.
    pub method: String,
    /// The params, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<RawJson>,
}

impl InputRequest {
    /// An `elicitation/create` input request.
    pub fn from_elicitation(params: &ElicitRequestParams) -> Result<Self, Error> {
        Ok(Self {
            method: method::ELICITATION_CREATE.into(),
            params: Some(RawJson::from_value(params)?),
        })
    }

    /// The elicitation asked for, if this is `elicitation/create`.
    pub fn elicitation(&self) -> Option<Result<ElicitRequestParams, Error>> {
        (self.method == method::ELICITATION_CREATE).then(|| match &self.params {
            Some(p) => p.parse(),
            None => Err(Error::shape("elicitation/create without params")),
        })
    }
}

/// The retry's `inputResponses`: one answer per key of the interim result's
/// `inputRequests`.
pub type InputResponses = BTreeMap<String, InputResponse>;

/// One answer of a retry's `inputResponses`: the result of the input request it answers.
///
/// ```
/// use mcp_wire::{ElicitAction, ElicitResult, InputResponse, ListRootsResult, Root};
///
/// let cancel = InputResponse::from(ElicitResult::new(ElicitAction::Cancel));
/// assert_eq!(serde_json::to_string(&cancel).unwrap(), r#"{"action":"cancel"}"#);
/// let roots = InputResponse::from(ListRootsResult::new(vec![Root::new("file:///src")]));
/// assert_eq!(serde_json::to_string(&roots).unwrap(), r#"{"roots":[{"uri":"file:///src"}]}"#);
/// let read: InputResponse = serde_json::from_str(r#"{"roots":[]}"#).unwrap();
/// assert!(matches!(read, InputResponse::Roots(_)));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum InputResponse {
    /// The answer to `elicitation/create`.
    Elicitation(ElicitResult),
    /// The answer to `roots/list`.
    Roots(ListRootsResult),
}

impl From<ElicitResult> for InputResponse {
    fn from(answer: ElicitResult) -> Self {
        Self::Elicitation(answer)
    }
}

impl From<ListRootsResult> for InputResponse {
    fn from(answer: ListRootsResult) -> Self {
        Self::Roots(answer)
    }
}

/// Reads a member that is there, whatever its value, `null` included, so that an explicit
/// `null` (`Some(Value::Null)`, or `Some(None)` for an `Option`) stays apart from an absent
/// member (`None`, by `default`).
pub(crate) fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}
