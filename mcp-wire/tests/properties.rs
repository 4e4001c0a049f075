//! Property tests of `mcp-wire`: the decoders never panic on any input, generated messages
//! survive encode → decode → encode byte for byte, the header value encoding is a lossless
//! and header-safe round trip, and `x-mcp-header` validation never panics.

use mcp_wire::header::{PARAM_PREFIX, decode_value, encode_value};
use mcp_wire::{
    ClientCapabilities, Error, ErrorObject, Implementation, Message, Meta, ModernMeta, RequestId,
    RequestMeta, Revision, ToolHeaders, decode, decode_response, encode_error, encode_notification,
    encode_request, encode_request_with_meta, encode_result,
};
use proptest::prelude::*;
use serde_json::{Map, Value};

fn config() -> ProptestConfig {
    ProptestConfig {
        // No regression files written into the source tree.
        failure_persistence: None,
        ..ProptestConfig::with_cases(256)
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies.
// ---------------------------------------------------------------------------------------------

/// Floats that print and parse back to the same `f64` without `arbitrary_precision`: eighths
/// of an `i32` (dyadic, a handful of digits).
fn float() -> impl Strategy<Value = f64> {
    any::<i32>().prop_map(|k| f64::from(k) / 8.0)
}

/// Integers, with the edges of the header range and of `i64` drawn often.
fn integer() -> impl Strategy<Value = i64> {
    prop_oneof![
        any::<i64>(),
        Just(i64::MIN),
        -1000i64..1000,
        Just((1i64 << 53) - 1),
        Just(1i64 << 53),
        Just(-((1i64 << 53) - 1)),
        Just(i64::MAX),
    ]
}

fn leaf(strings: BoxedStrategy<String>) -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        integer().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        float().prop_map(Value::from),
        strings.prop_map(Value::String),
    ]
    .boxed()
}

/// Any JSON value whose strings and keys come from the given strategies.
fn json_with(keys: BoxedStrategy<String>, strings: BoxedStrategy<String>) -> BoxedStrategy<Value> {
    leaf(strings)
        .prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map(keys.clone(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
        .boxed()
}

fn any_json() -> BoxedStrategy<Value> {
    json_with(any::<String>().boxed(), any::<String>().boxed())
}

fn any_object() -> BoxedStrategy<Map<String, Value>> {
    proptest::collection::btree_map(any::<String>(), any_json(), 0..6)
        .prop_map(|m| m.into_iter().collect())
        .boxed()
}

fn request_id() -> impl Strategy<Value = RequestId> {
    prop_oneof![
        any::<i64>().prop_map(RequestId::Number),
        any::<String>().prop_map(RequestId::String),
    ]
}

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        Just("tools/call".to_owned()),
        Just("notifications/progress".to_owned()),
        "[a-z]{1,8}(/[a-zA-Z_]{1,8}){0,2}",
    ]
}

fn error_object() -> impl Strategy<Value = ErrorObject> {
    (
        any::<i64>(),
        any::<String>(),
        // Explicit `null` data included: it is kept apart from absent data.
        proptest::option::of(prop_oneof![1 => Just(Value::Null), 4 => any_json()]),
    )
        .prop_map(|(code, message, data)| {
            let e = ErrorObject::new(code, message);
            match data {
                Some(d) => e.with_data(d),
                None => e,
            }
        })
}

#[derive(Debug, Clone)]
enum Generated {
    Request {
        id: RequestId,
        method: String,
        params: Option<Map<String, Value>>,
    },
    Notification {
        method: String,
        params: Option<Map<String, Value>>,
    },
    Result {
        id: RequestId,
        result: Map<String, Value>,
    },
    Error {
        id: Option<RequestId>,
        error: ErrorObject,
    },
}

fn generated() -> impl Strategy<Value = Generated> {
    prop_oneof![
        (request_id(), method(), proptest::option::of(any_object()))
            .prop_map(|(id, method, params)| Generated::Request { id, method, params }),
        (method(), proptest::option::of(any_object()))
            .prop_map(|(method, params)| Generated::Notification { method, params }),
        (request_id(), any_object()).prop_map(|(id, result)| Generated::Result { id, result }),
        (proptest::option::of(request_id()), error_object())
            .prop_map(|(id, error)| Generated::Error { id, error }),
    ]
}

fn encode_generated(g: &Generated) -> Vec<u8> {
    let mut out = Vec::new();
    match g {
        Generated::Request { id, method, params } => {
            encode_request(&mut out, id, method, params.as_ref())
        }
        Generated::Notification { method, params } => {
            encode_notification(&mut out, method, params.as_ref())
        }
        Generated::Result { id, result } => encode_result(&mut out, id, result),
        Generated::Error { id, error } => encode_error(&mut out, id.as_ref(), error),
    }
    .expect("generated values encode");
    out
}

fn raw_to_value(raw: Option<&serde_json::value::RawValue>) -> Option<Value> {
    raw.map(|r| serde_json::from_str(r.get()).expect("raw JSON parses"))
}

/// A valid message and some ways of breaking it.
fn mutated_message() -> impl Strategy<Value = Vec<u8>> {
    const SEEDS: [&str; 5] = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":[1,2.5,"s"]}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}"#,
        r#"{"jsonrpc":"2.0","id":"abc","result":{"content":[{"type":"text","text":"é"}]}}"#,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":{}}}"#,
        r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
    ];
    (
        0..SEEDS.len(),
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6),
    )
        .prop_map(|(seed, edits)| {
            let mut bytes = SEEDS[seed].as_bytes().to_vec();
            for (at, byte, op) in edits {
                if bytes.is_empty() {
                    bytes.push(byte);
                    continue;
                }
                let i = at.index(bytes.len());
                match op {
                    0 => bytes[i] = byte,
                    1 => bytes.insert(i, byte),
                    _ => bytes.truncate(i),
                }
            }
            bytes
        })
}

/// JSON text shaped like a message: each envelope member is mostly well formed, sometimes
/// any JSON value, sometimes absent, in any order, with extra members and now and then a
/// bare JSON value instead of an object.
fn message_like() -> impl Strategy<Value = String> {
    fn member(
        name: &'static str,
        presence: f64,
        good: BoxedStrategy<Value>,
    ) -> BoxedStrategy<Option<(String, Value)>> {
        let value = prop_oneof![5 => good, 1 => any_json()];
        proptest::option::weighted(presence, value.prop_map(move |v| (name.to_owned(), v))).boxed()
    }
    let id = prop_oneof![
        integer().prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        Just(Value::Null),
    ]
    .boxed();
    let error = (
        any::<i64>(),
        any::<String>(),
        proptest::option::of(any_json()),
    )
        .prop_map(|(code, message, data)| {
            let mut e = Map::new();
            e.insert("code".into(), code.into());
            e.insert("message".into(), message.into());
            if let Some(d) = data {
                e.insert("data".into(), d);
            }
            Value::Object(e)
        })
        .boxed();
    let members = (
        member("jsonrpc", 0.95, Just(Value::from("2.0")).boxed()),
        member("id", 0.8, id),
        member("method", 0.5, method().prop_map(Value::String).boxed()),
        member("params", 0.4, any_object().prop_map(Value::Object).boxed()),
        member("result", 0.4, any_object().prop_map(Value::Object).boxed()),
        member("error", 0.3, error),
        proptest::collection::vec((any::<String>(), any_json()), 0..2),
    )
        .prop_map(|(a, b, c, d, e, f, extra)| {
            let mut all: Vec<(String, Value)> = [a, b, c, d, e, f].into_iter().flatten().collect();
            all.extend(extra);
            all
        })
        .prop_shuffle();
    let envelope = members.prop_map(|members| {
        let mut text = String::from("{");
        for (i, (k, v)) in members.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(&serde_json::to_string(k).unwrap());
            text.push(':');
            text.push_str(&serde_json::to_string(v).unwrap());
        }
        text.push('}');
        text
    });
    prop_oneof![
        8 => envelope,
        1 => any_json().prop_map(|v| serde_json::to_string(&v).unwrap()),
    ]
}

/// Schema-shaped JSON: keys are mostly schema keywords, strings mostly type names and header
/// names.
fn schema_like() -> BoxedStrategy<Value> {
    let keys = prop_oneof![
        8 => prop::sample::select(vec![
            "type", "properties", "items", "prefixItems", "oneOf", "anyOf", "allOf", "not", "if",
            "then", "else", "$ref", "$defs", "definitions", "additionalProperties",
            "patternProperties", "dependentSchemas", "contains", "x-mcp-header", "a", "b", "Region",
        ])
        .prop_map(str::to_owned),
        1 => any::<String>(),
    ];
    let strings = prop_oneof![
        8 => prop::sample::select(vec![
            "string", "integer", "boolean", "number", "object", "Region", "region", "", "X Y",
            "Mcp-Name", "a\r\nb",
        ])
        .prop_map(str::to_owned),
        1 => any::<String>(),
    ];
    json_with(keys.boxed(), strings.boxed())
}

/// Strings biased towards the interesting cases of the header encoding.
fn header_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ -~]{0,24}",
        "[ -~\t\n\u{7f}]{0,12}",
        "[ -~]{0,8}".prop_map(|s| format!("=?base64?{s}?=")),
        "[a-z]{0,4}".prop_map(|s| format!(" {s}")),
        "[a-z]{0,4}".prop_map(|s| format!("{s} ")),
    ]
}

// ---------------------------------------------------------------------------------------------
// Properties.
// ---------------------------------------------------------------------------------------------

/// Whatever `decode` accepts, `Message::encode` writes back and `decode` reads the same.
fn check_decode_consistency(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(message) = decode(bytes, usize::MAX) {
        let mut out = Vec::new();
        message
            .encode(&mut out)
            .map_err(|e| TestCaseError::fail(format!("decoded but cannot encode: {e:?}")))?;
        let again = decode(&out, usize::MAX)
            .map_err(|e| TestCaseError::fail(format!("re-encoded but cannot decode: {e:?}")))?;
        prop_assert_eq!(again, message);
    }
    let _ = decode_response::<Value>(bytes, usize::MAX);
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn decoders_never_panic_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode(&bytes, usize::MAX);
        let _ = decode_response::<Value>(&bytes, usize::MAX);
        check_decode_consistency(&bytes)?;
    }

    #[test]
    fn decoders_never_panic_on_broken_messages(bytes in mutated_message()) {
        check_decode_consistency(&bytes)?;
        // A limit below the length is always TooLarge, whatever the bytes.
        if !bytes.is_empty() {
            prop_assert_eq!(
                decode(&bytes, bytes.len() - 1),
                Err(Error::TooLarge { len: bytes.len(), limit: bytes.len() - 1 })
            );
        }
    }

    #[test]
    fn decoders_never_panic_on_json_text(text in message_like()) {
        check_decode_consistency(text.as_bytes())?;
    }

    /// A request written with its `_meta` in one pass is the request whose params hold that
    /// `_meta` as a member: the same JSON, and no key written twice.
    #[test]
    fn a_request_with_meta_is_its_params_with_the_member(
        id in request_id(),
        method in method(),
        mut params in any_object(),
        modern in any::<bool>(),
        token in proptest::option::of(request_id()),
        extra in proptest::option::of(any_object()),
    ) {
        params.remove("_meta");
        let info = Implementation::new("c", "1");
        let caps = ClientCapabilities::none();
        let rendered = ModernMeta {
            revision: Revision::V2026_07_28,
            client_info: &info,
            client_capabilities: &caps,
        }
        .render()
        .unwrap();
        let mut meta = RequestMeta::default();
        meta.modern = modern.then_some(&rendered);
        meta.progress_token = token.as_ref();
        meta.extra = extra.as_ref();
        let mut out = b"kept".to_vec();
        encode_request_with_meta(&mut out, &id, &method, &params, &meta).unwrap();
        prop_assert!(out.starts_with(b"kept"));
        let out = &out[4..];

        let mut whole = params.clone();
        if !meta.is_empty() {
            let mut member = Meta::new();
            meta.insert_into(&mut member);
            whole.insert("_meta".into(), Value::Object(member));
        }
        let mut expected = Vec::new();
        encode_request(&mut expected, &id, &method, Some(&whole)).unwrap();
        let written: Value = serde_json::from_slice(out).unwrap();
        prop_assert_eq!(&written, &serde_json::from_slice::<Value>(&expected).unwrap());
        // A key written twice would be dropped by the parse, and the text would shrink.
        prop_assert_eq!(serde_json::to_vec(&written).unwrap().len(), out.len());
    }

    #[test]
    fn generated_messages_round_trip(g in generated()) {
        let bytes = encode_generated(&g);
        let message = decode(&bytes, bytes.len())
            .map_err(|e| TestCaseError::fail(format!("{e:?} for {}", String::from_utf8_lossy(&bytes))))?;
        match (&g, &message) {
            (Generated::Request { id, method, params }, Message::Request(r)) => {
                prop_assert_eq!(&r.id, id);
                prop_assert_eq!(r.method.as_ref(), method.as_str());
                prop_assert_eq!(raw_to_value(r.params), params.clone().map(Value::Object));
                let typed: Value = r.params_as().unwrap();
                prop_assert_eq!(typed, Value::Object(params.clone().unwrap_or_default()));
            }
            (Generated::Notification { method, params }, Message::Notification(n)) => {
                prop_assert_eq!(n.method.as_ref(), method.as_str());
                prop_assert_eq!(raw_to_value(n.params), params.clone().map(Value::Object));
            }
            (Generated::Result { id, result }, Message::Response(r)) => {
                prop_assert_eq!(r.id.as_ref(), Some(id));
                let got: Result<Value, ErrorObject> = r.result_as().unwrap();
                prop_assert_eq!(got, Ok(Value::Object(result.clone())));
                let typed = decode_response::<Map<String, Value>>(&bytes, usize::MAX).unwrap();
                prop_assert_eq!(typed.id.as_ref(), Some(id));
                prop_assert_eq!(typed.outcome, Ok(result.clone()));
            }
            (Generated::Error { id, error }, Message::Response(r)) => {
                prop_assert_eq!(&r.id, id);
                prop_assert_eq!(r.outcome.as_ref().err(), Some(error));
                let typed = decode_response::<Value>(&bytes, usize::MAX).unwrap();
                prop_assert_eq!(&typed.id, id);
                prop_assert_eq!(typed.outcome.as_ref().err(), Some(error));
            }
            (g, m) => prop_assert!(false, "generated {:?}, decoded {:?}", g, m),
        }
        let mut again = Vec::new();
        message.encode(&mut again).unwrap();
        prop_assert_eq!(again, bytes);
    }

    #[test]
    fn header_values_round_trip_and_are_header_safe(value in header_text()) {
        let encoded = encode_value(&value);
        prop_assert!(
            encoded.bytes().all(|b| (0x20..=0x7e).contains(&b)),
            "not visible ASCII or space: {:?}", encoded
        );
        prop_assert!(!encoded.starts_with(' ') && !encoded.ends_with(' '), "padded: {:?}", encoded);
        let decoded = decode_value(&encoded).unwrap();
        prop_assert_eq!(decoded.as_ref(), value.as_str());

        // A plain value goes as it is; anything else gets the sentinel form.
        let sentinel_shaped = value.starts_with("=?base64?") && value.ends_with("?=");
        let plain = value.bytes().all(|b| (0x20..=0x7e).contains(&b))
            && !value.starts_with(' ')
            && !value.ends_with(' ')
            && !sentinel_shaped;
        if plain {
            prop_assert_eq!(encoded.as_ref(), value.as_str());
        } else {
            prop_assert!(encoded.starts_with("=?base64?") && encoded.ends_with("?="));
        }
    }

    #[test]
    fn tool_headers_never_panic_on_any_json(schema in any_json()) {
        let _ = ToolHeaders::from_value(&schema);
    }

    #[test]
    fn tool_headers_keep_their_rules_on_schema_like_json(
        schema in schema_like(),
        arguments in schema_like(),
    ) {
        let Ok(headers) = ToolHeaders::from_value(&schema) else {
            return Ok(());
        };
        for (i, h) in headers.headers().iter().enumerate() {
            prop_assert!(!h.name.is_empty());
            prop_assert!(
                h.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)),
                "not a token: {:?}", h.name
            );
            for other in &headers.headers()[..i] {
                prop_assert!(!other.name.eq_ignore_ascii_case(&h.name), "duplicate {:?}", h.name);
            }
        }
        match headers.derive(arguments.as_object()) {
            Ok(derived) => {
                for (name, value) in derived {
                    prop_assert!(name.starts_with(PARAM_PREFIX));
                    prop_assert!(value.bytes().all(|b| (0x20..=0x7e).contains(&b)));
                    prop_assert!(decode_value(&value).is_ok());
                }
            }
            Err(Error::HeaderValue { name, .. }) => {
                prop_assert!(headers.headers().iter().any(|h| h.name == name));
            }
            Err(other) => prop_assert!(false, "unexpected error {:?}", other),
        }
    }
}
