//! `artifact.*`: named contents of a unit of work, delivered with its task.
//!
//! A name is 1..=128 bytes without `/` or control characters ([`check_name`]); a content at
//! most 8 MiB decoded ([`CONTENT_MAX`]). Creating an existing name replaces it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::Error;
use crate::schema::parse;

/// A name's largest size, in bytes.
pub const NAME_MAX: usize = 128;
/// A content's largest size, in bytes decoded (8 MiB).
pub const CONTENT_MAX: usize = 8 * 1024 * 1024;

/// An artifact: its name, media type and content.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Artifact {
    /// Its name in its unit.
    pub name: String,
    /// Its media type.
    pub media_type: String,
    /// Its bytes.
    pub content: Vec<u8>,
}

impl Artifact {
    /// `name` of `media_type` holding `content`.
    pub fn new(name: &str, media_type: &str, content: Vec<u8>) -> Self {
        Self {
            name: name.to_owned(),
            media_type: media_type.to_owned(),
            content,
        }
    }

    /// Whether its content is given as text: a `text/*` or JSON media type, and UTF-8.
    pub fn is_text(&self) -> bool {
        let essence = self.media_type.split(';').next().unwrap_or("").trim();
        let textual = essence.starts_with("text/")
            || essence == "application/json"
            || essence.ends_with("+json");
        textual && std::str::from_utf8(&self.content).is_ok()
    }
}

/// An artifact in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Listed {
    /// Its name.
    pub name: String,
    /// Its media type.
    pub media_type: String,
    /// Its size, in bytes.
    pub bytes: usize,
}

impl Listed {
    /// `name` of `media_type`, of `bytes`.
    pub fn new(name: &str, media_type: &str, bytes: usize) -> Self {
        Self {
            name: name.to_owned(),
            media_type: media_type.to_owned(),
            bytes,
        }
    }
}

/// The artifacts of each unit of work (`unit`: [`Caller::unit`](crate::Caller::unit)).
/// Names reach the service checked ([`check_name`]), contents within [`CONTENT_MAX`].
pub trait Artifacts: Send + Sync {
    /// Creates `artifact` in `unit`, replacing one of the same name.
    fn create(
        &self,
        unit: &str,
        artifact: Artifact,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// `unit`'s artifact `name`, if any.
    fn get(
        &self,
        unit: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Artifact>, Error>> + Send;

    /// Deletes `unit`'s artifact `name`; whether it was there.
    fn delete(&self, unit: &str, name: &str) -> impl Future<Output = Result<bool, Error>> + Send;

    /// `unit`'s artifacts, by name in byte order.
    fn list(&self, unit: &str) -> impl Future<Output = Result<Vec<Listed>, Error>> + Send;
}

/// Checks an artifact name: 1..=128 bytes, no `/`, no control characters.
pub fn check_name(tool: &str, name: &str) -> Result<(), Error> {
    let message = if name.is_empty() || name.len() > NAME_MAX {
        "a name is 1 to 128 bytes"
    } else if name.contains('/') || name.chars().any(char::is_control) {
        "a name holds no / and no control characters"
    } else {
        return Ok(());
    };
    Err(Error::invalid(tool, "/name", "name", message))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Create {
    name: String,
    media_type: String,
    text: Option<String>,
    base64: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Name {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Nothing {}

/// Runs artifact tool `tool` for `unit`.
pub(crate) async fn call(
    artifacts: &impl Artifacts,
    unit: &str,
    tool: &str,
    arguments: Value,
) -> Result<Value, Error> {
    match tool {
        "artifact.create" => {
            let args: Create = parse(tool, arguments)?;
            check_name(tool, &args.name)?;
            let content = match (args.text, args.base64) {
                (Some(text), None) => text.into_bytes(),
                (None, Some(encoded)) => {
                    // Decoded, the content is at most 3/4 of its encoding: refuse what
                    // cannot fit before decoding it.
                    if encoded.len() / 4 * 3 > CONTENT_MAX + 2 {
                        return Err(too_large(encoded.len() / 4 * 3));
                    }
                    STANDARD
                        .decode(encoded)
                        .map_err(|e| Error::invalid(tool, "/base64", "base64", e.to_string()))?
                }
                _ => {
                    return Err(Error::invalid(
                        tool,
                        "",
                        "oneOf",
                        "exactly one of text and base64",
                    ));
                }
            };
            if content.len() > CONTENT_MAX {
                return Err(too_large(content.len()));
            }
            let artifact = Artifact::new(&args.name, &args.media_type, content);
            let answer = listed(&artifact);
            artifacts.create(unit, artifact).await?;
            Ok(answer)
        }
        "artifact.get" => {
            let Name { name } = parse(tool, arguments)?;
            check_name(tool, &name)?;
            let artifact = artifacts.get(unit, &name).await?.ok_or(Error::NotFound {
                what: format!("artifact {name:?}"),
            })?;
            let mut answer = listed(&artifact);
            if artifact.is_text() {
                answer["text"] = json!(String::from_utf8_lossy(&artifact.content));
            } else {
                answer["base64"] = json!(STANDARD.encode(&artifact.content));
            }
            Ok(answer)
        }
        "artifact.delete" => {
            let Name { name } = parse(tool, arguments)?;
            check_name(tool, &name)?;
            Ok(json!({"deleted": artifacts.delete(unit, &name).await?}))
        }
        _ => {
            let Nothing {} = parse(tool, arguments)?;
            let all: Vec<Value> = artifacts
                .list(unit)
                .await?
                .into_iter()
                .map(|a| json!({"name": a.name, "media_type": a.media_type, "bytes": a.bytes}))
                .collect();
            Ok(json!({"artifacts": all}))
        }
    }
}

fn listed(a: &Artifact) -> Value {
    json!({"name": a.name, "media_type": a.media_type, "bytes": a.content.len()})
}

fn too_large(size: usize) -> Error {
    Error::TooLarge {
        what: "content",
        size,
        max: CONTENT_MAX,
    }
}
