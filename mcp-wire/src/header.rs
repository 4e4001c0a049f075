//! HTTP header values that mirror the body (2026-07-28): `x-mcp-header` annotations, the
//! `Mcp-Param-*` headers derived from a call's arguments, and the `=?base64?…?=` encoding
//! shared with `Mcp-Name`.

use std::borrow::Cow;
use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use crate::{Error, RawJson};

/// The prefix of a header derived from an annotated tool argument.
pub const PARAM_PREFIX: &str = "Mcp-Param-";

/// The annotation keyword in a property's schema.
pub const ANNOTATION: &str = "x-mcp-header";

/// The largest integer a header may carry: 2^53 − 1, JavaScript's safe range.
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// Why a tool's `x-mcp-header` annotations are invalid. Such a tool is left out of the
/// client's view of `tools/list`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidAnnotation {
    /// The input schema is not a JSON object.
    Schema,
    /// The annotation's value is not a string.
    NotAString {
        /// The property path, dot-joined.
        path: String,
    },
    /// The annotation is the empty string.
    Empty {
        /// The property path, dot-joined.
        path: String,
    },
    /// The name has a character that is not an RFC 9110 `tchar`.
    BadCharacter {
        /// The name.
        name: String,
    },
    /// Two annotations share a name, regardless of case.
    Duplicate {
        /// The name, as written the second time.
        name: String,
    },
    /// The annotated property's `type` is not `string`, `integer` or `boolean`.
    UnsupportedType {
        /// The name.
        name: String,
    },
    /// The annotation is not on a property reachable from the root through `properties` alone
    /// (it sits on the root itself, or under `items`, a composition or conditional keyword,
    /// `$ref`, `$defs`, …).
    NotStaticallyReachable {
        /// The keyword path to it, dot-joined.
        path: String,
    },
}

impl fmt::Display for InvalidAnnotation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Schema => f.write_str("inputSchema is not a JSON object"),
            Self::NotAString { path } => write!(f, "annotation at {path} is not a string"),
            Self::Empty { path } => write!(f, "annotation at {path} is empty"),
            Self::BadCharacter { name } => {
                write!(f, "{name:?} is not an HTTP token")
            }
            Self::Duplicate { name } => write!(f, "{name:?} is used twice (ignoring case)"),
            Self::UnsupportedType { name } => {
                write!(
                    f,
                    "{name:?} annotates a property that is not string, integer or boolean"
                )
            }
            Self::NotStaticallyReachable { path } => {
                write!(
                    f,
                    "annotation at {path} is not reachable through properties alone"
                )
            }
        }
    }
}

/// One header a tool's schema asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParamHeader {
    /// The name part: the header is `Mcp-Param-{name}`.
    pub name: String,
    /// The property path from the root of the arguments.
    pub path: Vec<String>,
}

/// The `Mcp-Param-*` headers of one tool, validated.
///
/// ```
/// use mcp_wire::{RawJson, ToolHeaders};
/// use serde_json::json;
///
/// let schema = RawJson::from_text(r#"{"type":"object","properties":{
///     "region":{"type":"string","x-mcp-header":"Region"},
///     "query":{"type":"string"}}}"#).unwrap();
/// let headers = ToolHeaders::from_schema(&schema).unwrap();
/// let args = json!({"region": "us-west1", "query": "SELECT 1"});
/// let derived = headers.derive(args.as_object()).unwrap();
/// assert_eq!(derived, [("Mcp-Param-Region".to_string(), "us-west1".to_string())]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolHeaders(Vec<ParamHeader>);

impl ToolHeaders {
    /// Reads and validates every `x-mcp-header` annotation of a tool's input schema.
    pub fn from_schema(input_schema: &RawJson) -> Result<Self, Error> {
        let schema: Value = input_schema.parse()?;
        Self::from_value(&schema).map_err(Error::InvalidHeaderAnnotation)
    }

    /// As [`ToolHeaders::from_schema`], from a parsed schema.
    pub fn from_value(schema: &Value) -> Result<Self, InvalidAnnotation> {
        let Value::Object(root) = schema else {
            return Err(InvalidAnnotation::Schema);
        };
        let mut found = Vec::new();
        walk(root, &mut Vec::new(), true, &mut found)?;
        for (i, h) in found.iter().enumerate() {
            if found[..i]
                .iter()
                .any(|e: &ParamHeader| e.name.eq_ignore_ascii_case(&h.name))
            {
                return Err(InvalidAnnotation::Duplicate {
                    name: h.name.clone(),
                });
            }
        }
        Ok(Self(found))
    }

    /// The headers, in schema order.
    pub fn headers(&self) -> &[ParamHeader] {
        &self.0
    }

    /// Whether the tool asks for no headers.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `(Mcp-Param-{name}, value)` pairs for a call with these arguments. A value that is
    /// absent or `null` gives no header; strings go as they are, integers in decimal, booleans
    /// as `true`/`false`, each encoded by [`encode_value`].
    pub fn derive(
        &self,
        arguments: Option<&Map<String, Value>>,
    ) -> Result<Vec<(String, String)>, Error> {
        self.values(arguments)
            .map(|derived| {
                let (index, value) = derived?;
                let name = &self.0[index].name;
                Ok((format!("{PARAM_PREFIX}{name}"), value.into_owned()))
            })
            .collect()
    }

    /// The encoded value of each header a call with these arguments carries, with the
    /// header's index in [`ToolHeaders::headers`], in schema order: what
    /// [`ToolHeaders::derive`] pairs with the headers' names, for a caller that holds the
    /// names ready.
    pub fn values<'a>(
        &'a self,
        arguments: Option<&'a Map<String, Value>>,
    ) -> impl Iterator<Item = Result<(usize, Cow<'a, str>), Error>> + 'a {
        self.0
            .iter()
            .enumerate()
            .filter_map(move |(index, header)| {
                let value = lookup(arguments, &header.path)?;
                Some(match stringify(value) {
                    Ok(Cow::Borrowed(text)) => Ok((index, encode_value(text))),
                    Ok(Cow::Owned(text)) => Ok((index, encode_value(&text).into_owned().into())),
                    Err(detail) => Err(Error::HeaderValue {
                        name: header.name.clone(),
                        detail: detail.into(),
                    }),
                })
            })
    }
}

/// Keywords whose value is one subschema.
const SCHEMA_KEYWORDS: &[&str] = &[
    "items",
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "additionalItems",
];

/// Keywords whose value is an array of subschemas.
const SCHEMA_ARRAY_KEYWORDS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];

/// Keywords whose value is a map of subschemas, other than `properties`.
const SCHEMA_MAP_KEYWORDS: &[&str] = &[
    "$defs",
    "definitions",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
];

/// Walks a schema object. `path` is the chain of keywords and property names from the root;
/// `reachable` says whether that chain is made of `properties` steps only.
fn walk(
    schema: &Map<String, Value>,
    path: &mut Vec<String>,
    reachable: bool,
    found: &mut Vec<ParamHeader>,
) -> Result<(), InvalidAnnotation> {
    if let Some(annotation) = schema.get(ANNOTATION) {
        let shown = || path_text(path);
        // The root is the arguments object itself, not a property of it.
        if !reachable || path.is_empty() {
            return Err(InvalidAnnotation::NotStaticallyReachable { path: shown() });
        }
        let Value::String(name) = annotation else {
            return Err(InvalidAnnotation::NotAString { path: shown() });
        };
        if name.is_empty() {
            return Err(InvalidAnnotation::Empty { path: shown() });
        }
        if !name.bytes().all(is_tchar) {
            return Err(InvalidAnnotation::BadCharacter { name: name.clone() });
        }
        if !matches!(
            schema.get("type").and_then(Value::as_str),
            Some("string" | "integer" | "boolean")
        ) {
            return Err(InvalidAnnotation::UnsupportedType { name: name.clone() });
        }
        found.push(ParamHeader {
            name: name.clone(),
            path: path.clone(),
        });
    }
    for (keyword, value) in schema {
        match (keyword.as_str(), value) {
            ("properties", Value::Object(props)) => {
                for (name, sub) in props {
                    if let Value::Object(sub) = sub {
                        path.push(name.clone());
                        walk(sub, path, reachable, found)?;
                        path.pop();
                    }
                }
            }
            (k, Value::Object(sub)) if SCHEMA_KEYWORDS.contains(&k) || k == "$ref" => {
                path.push(k.to_owned());
                walk(sub, path, false, found)?;
                path.pop();
            }
            (k, Value::Array(subs)) if SCHEMA_ARRAY_KEYWORDS.contains(&k) => {
                path.push(k.to_owned());
                for sub in subs.iter().filter_map(Value::as_object) {
                    walk(sub, path, false, found)?;
                }
                path.pop();
            }
            (k, Value::Object(subs)) if SCHEMA_MAP_KEYWORDS.contains(&k) => {
                path.push(k.to_owned());
                for sub in subs.values().filter_map(Value::as_object) {
                    walk(sub, path, false, found)?;
                }
                path.pop();
            }
            _ => {}
        }
    }
    Ok(())
}

fn path_text(path: &[String]) -> String {
    if path.is_empty() {
        "the root".into()
    } else {
        path.join(".")
    }
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn lookup<'a>(arguments: Option<&'a Map<String, Value>>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut value = arguments?.get(first)?;
    for step in rest {
        value = value.as_object()?.get(step)?;
    }
    (!value.is_null()).then_some(value)
}

fn stringify(value: &Value) -> Result<Cow<'_, str>, &'static str> {
    match value {
        Value::String(s) => Ok(Cow::Borrowed(s)),
        Value::Bool(b) => Ok(Cow::Borrowed(if *b { "true" } else { "false" })),
        Value::Number(n) => {
            let int = n
                .as_i64()
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER as f64)
                        .map(|f| f as i64)
                })
                .ok_or("a number that is not an integer")?;
            if int.unsigned_abs() > MAX_SAFE_INTEGER.unsigned_abs() {
                return Err("an integer outside ±(2^53−1)");
            }
            Ok(Cow::Owned(int.to_string()))
        }
        Value::Null | Value::Array(_) | Value::Object(_) => Err("not a string, integer or boolean"),
    }
}

/// Encodes a header value: as it is when it is plain safe ASCII, else as
/// `=?base64?{base64 of its UTF-8}?=`. Not plain: anything outside visible ASCII and space,
/// leading or trailing whitespace, or a value that itself looks like the sentinel.
///
/// ```
/// use mcp_wire::header::encode_value;
///
/// assert_eq!(encode_value("us-west1"), "us-west1");
/// assert_eq!(encode_value("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
/// assert_eq!(encode_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
/// assert_eq!(encode_value("=?base64?literal?="), "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=");
/// ```
pub fn encode_value(value: &str) -> Cow<'_, str> {
    if is_plain(value) {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(SENTINEL_START.len() + value.len().div_ceil(3) * 4 + 2);
    out.push_str(SENTINEL_START);
    STANDARD.encode_string(value.as_bytes(), &mut out);
    out.push_str(SENTINEL_END);
    Cow::Owned(out)
}

/// Visible ASCII and inner spaces only, and not the sentinel's shape.
fn is_plain(value: &str) -> bool {
    let visible = value.bytes().all(|b| (0x20..=0x7e).contains(&b));
    let padded = value.starts_with(' ') || value.ends_with(' ');
    let sentinel = value.starts_with(SENTINEL_START) && value.ends_with(SENTINEL_END);
    visible && !padded && !sentinel
}

/// Decodes a header value written by [`encode_value`]: the sentinel form is decoded, any
/// other value is returned as it is.
///
/// ```
/// use mcp_wire::header::decode_value;
///
/// assert_eq!(decode_value("=?base64?SGVsbG8sIOS4lueVjA==?=").unwrap(), "Hello, 世界");
/// assert_eq!(decode_value("us-west1").unwrap(), "us-west1");
/// ```
pub fn decode_value(value: &str) -> Result<Cow<'_, str>, Error> {
    let Some(inner) = value
        .strip_prefix(SENTINEL_START)
        .and_then(|v| v.strip_suffix(SENTINEL_END))
    else {
        return Ok(Cow::Borrowed(value));
    };
    let bytes = STANDARD.decode(inner).map_err(|_| Error::EncodedHeader)?;
    String::from_utf8(bytes)
        .map(Cow::Owned)
        .map_err(|_| Error::EncodedHeader)
}
