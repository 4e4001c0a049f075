//! JSON-RPC 2.0 messages: decoding one from bytes, and encoding.
//!
//! Decoding borrows: a [`Message`] keeps `params` and `result` as [`RawValue`] slices of the
//! input, so the envelope is read without building a tree, and the caller decodes the part
//! it expects straight into its type ([`Request::params_as`], [`Response::result_as`]).
//! [`decode_response`] does both in one pass when the result type is known up front.

use std::borrow::Cow;

use std::fmt;

use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::{
    Error, ErrorObject, RequestId, encode_error, encode_notification, encode_request, encode_result,
};

/// The only `jsonrpc` value there is.
pub const JSONRPC_VERSION: &str = "2.0";

/// A decoded JSON-RPC message, borrowing from the bytes it was read from.
#[derive(Debug, Clone, PartialEq)]
pub enum Message<'a> {
    /// A request: it has a `method` and an `id`.
    Request(Request<'a>),
    /// A notification: a `method` and no `id`.
    Notification(Notification<'a>),
    /// A response: a `result` or an `error`.
    Response(Response<'a>),
}

/// A JSON-RPC request.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The request's id.
    pub id: RequestId,
    /// The method.
    pub method: Cow<'a, str>,
    /// The params object, verbatim.
    pub params: Option<&'a RawValue>,
}

/// A JSON-RPC notification.
#[derive(Debug, Clone)]
pub struct Notification<'a> {
    /// The method.
    pub method: Cow<'a, str>,
    /// The params object, verbatim.
    pub params: Option<&'a RawValue>,
}

/// A JSON-RPC response.
#[derive(Debug, Clone)]
pub struct Response<'a> {
    /// The id of the request answered; `None` only on an error response to a request that
    /// could not be read.
    pub id: Option<RequestId>,
    /// The result object, verbatim, or the error.
    pub outcome: Result<&'a RawValue, ErrorObject>,
}

fn raw_eq(a: Option<&RawValue>, b: Option<&RawValue>) -> bool {
    a.map(RawValue::get) == b.map(RawValue::get)
}

impl PartialEq for Request<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && self.method == other.method && raw_eq(self.params, other.params)
    }
}

impl PartialEq for Notification<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.method == other.method && raw_eq(self.params, other.params)
    }
}

impl PartialEq for Response<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && match (&self.outcome, &other.outcome) {
                (Ok(a), Ok(b)) => a.get() == b.get(),
                (Err(a), Err(b)) => a == b,
                _ => false,
            }
    }
}

fn parse_params<'a, T: Deserialize<'a>>(params: Option<&'a RawValue>) -> Result<T, Error> {
    let text = params.map_or("{}", RawValue::get);
    serde_json::from_str(text).map_err(|e| Error::from_json(&e))
}

impl<'a> Request<'a> {
    /// Decodes the params into `T`; absent params decode as `{}`.
    pub fn params_as<T: Deserialize<'a>>(&self) -> Result<T, Error> {
        parse_params(self.params)
    }
}

impl<'a> Notification<'a> {
    /// Decodes the params into `T`; absent params decode as `{}`.
    pub fn params_as<T: Deserialize<'a>>(&self) -> Result<T, Error> {
        parse_params(self.params)
    }
}

impl<'a> Response<'a> {
    /// Decodes the result into `T`, or hands back the error object.
    ///
    /// The outer `Result` is the decode; the inner one is the peer's answer.
    pub fn result_as<T: Deserialize<'a>>(&self) -> Result<Result<T, ErrorObject>, Error> {
        match &self.outcome {
            Ok(raw) => serde_json::from_str(raw.get())
                .map(Ok)
                .map_err(|e| Error::from_json(&e)),
            Err(e) => Ok(Err(e.clone())),
        }
    }
}

/// Every member a message may have, each optional, so that what is missing or misplaced can
/// be named after the parse.
///
/// Each member is read with [`present`]: an explicit `null` is kept (as `Some`) apart from an
/// absent member (`None`), so that `"method": null` or `"result": null` is an error, not
/// silence.
#[derive(Deserialize)]
#[serde(bound(deserialize = "R: Deserialize<'de>"))]
struct Envelope<'a, R> {
    #[serde(borrow, default, deserialize_with = "crate::result::present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "crate::result::present")]
    id: Option<Option<RequestId>>,
    #[serde(borrow, default, deserialize_with = "crate::result::present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "crate::result::present")]
    params: Option<&'a RawValue>,
    #[serde(default = "none", deserialize_with = "crate::result::present")]
    result: Option<R>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

fn none<R>() -> Option<R> {
    None
}

/// The method's text, borrowed from the input when it has no escapes.
fn method_text(raw: &RawValue) -> Result<Cow<'_, str>, Error> {
    let text = raw.get();
    match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        // The parser checked the string already; without escapes its text is its value.
        Some(inner) if !inner.contains('\\') => Ok(Cow::Borrowed(inner)),
        _ => serde_json::from_str::<String>(text)
            .map(Cow::Owned)
            .map_err(|_| Error::shape("method must be a string")),
    }
}

/// A value that must be a JSON object, decoded into `T` without buffering: `T` reads the
/// members straight from the parser.
struct ObjectOnly<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjectOnly<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(std::marker::PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
            type Value = T;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }

        d.deserialize_map(ObjectVisitor(std::marker::PhantomData))
            .map(ObjectOnly)
    }
}

/// Checks the limit and the first byte, so that a batch or a scalar gets its own error.
fn precheck(bytes: &[u8], limit: usize) -> Result<(), Error> {
    if bytes.len() > limit {
        return Err(Error::TooLarge {
            len: bytes.len(),
            limit,
        });
    }
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Ok(()),
        Some(b'[') => match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            Ok(_) => Err(Error::Batch),
            Err(e) => Err(Error::from_json(&e)),
        },
        _ => match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            Ok(_) => Err(Error::NotObject),
            Err(e) => Err(Error::from_json(&e)),
        },
    }
}

/// `jsonrpc` is read raw, so that a number or an object is a version error too.
fn check_version(jsonrpc: Option<&RawValue>) -> Result<(), Error> {
    match jsonrpc.map(RawValue::get) {
        Some("\"2.0\"") => Ok(()),
        found => Err(Error::Version {
            found: found.map(str::to_owned),
        }),
    }
}

fn check_object(raw: Option<&RawValue>, what: &str) -> Result<(), Error> {
    match raw {
        Some(r) if !r.get().starts_with('{') => {
            Err(Error::shape(format!("{what} must be a JSON object")))
        }
        _ => Ok(()),
    }
}

/// Decodes one JSON-RPC message from `bytes`, refusing input longer than `limit` bytes.
///
/// Unknown top-level members are ignored. A batch (a JSON array) is refused with
/// [`Error::Batch`]: MCP removed batches in 2025-06-18, a client never sends one, and no
/// revision lets a server answer a single request with one.
///
/// ```
/// use mcp_wire::{decode, Error, Message, RequestId};
///
/// let bytes = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
/// let Message::Request(req) = decode(bytes, 1024).unwrap() else { panic!() };
/// assert_eq!(req.id, RequestId::Number(1));
/// assert_eq!(req.method, "tools/list");
///
/// assert_eq!(decode(b"[]", 1024), Err(Error::Batch));
/// assert_eq!(decode(br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#, 1024), Err(Error::NullId));
/// assert!(matches!(decode(bytes, 8), Err(Error::TooLarge { .. })));
/// ```
pub fn decode(bytes: &[u8], limit: usize) -> Result<Message<'_>, Error> {
    let env: Envelope<'_, &RawValue> = parse(bytes, limit)?;
    check_object(env.result, "result")?;
    Ok(match classify(env)? {
        TypedMessage::Request(r) => Message::Request(r),
        TypedMessage::Notification(n) => Message::Notification(n),
        TypedMessage::Response(TypedResponse { id, outcome }) => {
            Message::Response(Response { id, outcome })
        }
    })
}

fn parse<'a, R: Deserialize<'a>>(bytes: &'a [u8], limit: usize) -> Result<Envelope<'a, R>, Error> {
    precheck(bytes, limit)?;
    let env: Envelope<'a, R> = serde_json::from_slice(bytes).map_err(|e| Error::from_json(&e))?;
    check_version(env.jsonrpc)?;
    Ok(env)
}

/// Tells a request, a notification and a response apart, and checks what each must have.
fn classify<R>(env: Envelope<'_, R>) -> Result<TypedMessage<'_, R>, Error> {
    if let Some(method) = env.method {
        let method = method_text(method)?;
        if env.result.is_some() || env.error.is_some() {
            return Err(Error::shape(
                "a message has both a method and a result or error",
            ));
        }
        check_object(env.params, "params")?;
        return match env.id {
            None => Ok(TypedMessage::Notification(Notification {
                method,
                params: env.params,
            })),
            Some(None) => Err(Error::NullId),
            Some(Some(id)) => Ok(TypedMessage::Request(Request {
                id,
                method,
                params: env.params,
            })),
        };
    }
    let outcome = outcome(env.result, env.error)?;
    let id = response_id(env.id, outcome.is_ok())?;
    Ok(TypedMessage::Response(TypedResponse { id, outcome }))
}

fn outcome<R>(
    result: Option<R>,
    error: Option<ErrorObject>,
) -> Result<Result<R, ErrorObject>, Error> {
    match (result, error) {
        (Some(r), None) => Ok(Ok(r)),
        (None, Some(e)) => Ok(Err(e)),
        (Some(_), Some(_)) => Err(Error::ResultAndError),
        (None, None) => Err(Error::NotAMessage),
    }
}

/// A successful response must name its request; an error response may not, when the
/// request could not be read.
fn response_id(id: Option<Option<RequestId>>, success: bool) -> Result<Option<RequestId>, Error> {
    match id.flatten() {
        Some(id) => Ok(Some(id)),
        None if success => Err(Error::shape("a result must carry the id of its request")),
        None => Ok(None),
    }
}

/// A message whose result, if it is a response, is decoded into `T` in the same pass: see
/// [`decode_as`].
#[derive(Debug, Clone, PartialEq)]
pub enum TypedMessage<'a, T> {
    /// A request (params kept raw, as in [`Message`]).
    Request(Request<'a>),
    /// A notification (params kept raw).
    Notification(Notification<'a>),
    /// A response, its result typed.
    Response(TypedResponse<T>),
}

/// A response with its result typed.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedResponse<T> {
    /// The id of the request answered (see [`Response::id`]).
    pub id: Option<RequestId>,
    /// The typed result, or the error.
    pub outcome: Result<T, ErrorObject>,
}

/// Decodes one message in one pass, reading a response's result straight into `T`.
///
/// This is the fast path for a stream on which the answer's type is known while requests
/// and notifications may come first: nothing is read twice, and no tree is built. A result
/// that is not a JSON object, or that does not fit `T`, is [`Error::Shape`].
///
/// ```
/// use mcp_wire::{decode_as, CallToolResult, Outcome, TypedMessage};
///
/// let bytes = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;
/// assert!(matches!(decode_as::<Outcome<CallToolResult>>(bytes, 1024), Ok(TypedMessage::Notification(_))));
/// let bytes = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
/// let Ok(TypedMessage::Response(r)) = decode_as::<Outcome<CallToolResult>>(bytes, 1024) else { panic!() };
/// assert!(matches!(r.outcome, Ok(Outcome::Complete(_))));
/// ```
pub fn decode_as<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
    limit: usize,
) -> Result<TypedMessage<'a, T>, Error> {
    let env: Envelope<'a, ObjectOnly<T>> = parse(bytes, limit)?;
    Ok(match classify(env)? {
        TypedMessage::Request(r) => TypedMessage::Request(r),
        TypedMessage::Notification(n) => TypedMessage::Notification(n),
        TypedMessage::Response(TypedResponse { id, outcome }) => {
            TypedMessage::Response(TypedResponse {
                id,
                outcome: outcome.map(|r| r.0),
            })
        }
    })
}

/// Decodes a response whose result type is known, in one pass over the bytes: as
/// [`decode_as`], with anything but a response refused as [`Error::Shape`].
///
/// ```
/// use mcp_wire::{decode_response, EmptyResult};
///
/// let r = decode_response::<EmptyResult>(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#, 64).unwrap();
/// assert!(r.outcome.is_ok());
/// ```
pub fn decode_response<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
    limit: usize,
) -> Result<TypedResponse<T>, Error> {
    match decode_as(bytes, limit)? {
        TypedMessage::Response(r) => Ok(r),
        _ => Err(Error::shape(
            "expected a response, found a request or notification",
        )),
    }
}

impl Message<'_> {
    /// Appends the message to `out`, as [`encode_request`] and its siblings would.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        match self {
            Self::Request(r) => encode_request(out, &r.id, &r.method, r.params),
            Self::Notification(n) => encode_notification(out, &n.method, n.params),
            Self::Response(Response { id, outcome }) => match (outcome, id) {
                (Ok(result), Some(id)) => encode_result(out, id, *result),
                (Ok(_), None) => Err(Error::shape("a result must carry the id of its request")),
                (Err(e), id) => encode_error(out, id.as_ref(), e),
            },
        }
    }
}
