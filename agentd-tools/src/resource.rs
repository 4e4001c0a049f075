//! The resources of a subagent's servers: the note of them its first context holds
//! ([`note`]), and `resource.read` ([`tool`], [`call`]), which its loop gets when its servers
//! expose resources.
//!
//! The note lists the resources its servers list (`resources/list`), its servers in their
//! order, each server's resources in the server's order: at most [`NOTE_MAX`] URIs, a URI
//! two servers list noted once, for the first; a name past [`NAME_MAX`] bytes is cut. It
//! says how many were left out past the bound.
//!
//! `resource.read` is not in the catalogue of the reference's table (so neither grants nor
//! `--capabilities` name it): it reads one resource by URI, `{"uri", "server"?}`, from
//! `server` (one of its servers), else from the server that listed the URI, else from the
//! first of its servers that expose resources. The answer is `{"server", "uri",
//! "contents"}`, the contents as the server gave them (text, or base64 `blob`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use mcp_wire::{Resource, ResourceContents};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::schema::parse;
use crate::{Error, Grant, Tool};

/// The name of the tool.
pub const NAME: &str = "resource.read";

/// The most URIs a resource note lists.
pub const NOTE_MAX: usize = 50;

/// The most bytes of a resource's name a note shows (the rest is cut, ending in `…`).
pub const NAME_MAX: usize = 128;

/// `resource.read`, offered to a subagent's loop whose servers expose resources.
pub fn tool() -> &'static Tool {
    static TOOL: OnceLock<Tool> = OnceLock::new();
    TOOL.get_or_init(|| {
        Tool::new(
            NAME,
            &[Grant::Subagent],
            "Read one resource of the subagent's servers by URI",
        )
    })
}

/// A resource note: its text, and the server each URI it lists was listed by.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Note {
    /// What the model reads.
    pub text: String,
    /// Every URI listed by a server (not only those the text shows), with the first server
    /// that listed it.
    pub servers: BTreeMap<String, String>,
}

/// The note of the resources `listed` by each server, servers in their order; `None` when
/// they list none.
pub fn note<'a>(listed: impl IntoIterator<Item = (&'a str, &'a [Resource])>) -> Option<Note> {
    let mut servers = BTreeMap::new();
    let mut lines = Vec::new();
    let mut left_out = 0usize;
    for (server, resources) in listed {
        for resource in resources {
            if servers.contains_key(&resource.uri) {
                continue;
            }
            servers.insert(resource.uri.clone(), server.to_owned());
            if lines.len() == NOTE_MAX {
                left_out += 1;
                continue;
            }
            let name = resource.title.as_deref().unwrap_or(&resource.name);
            let mut line = format!("- {} ({server}): {}", resource.uri, cut(name, NAME_MAX));
            if let Some(media) = &resource.mime_type {
                line.push_str(&format!(", {media}"));
            }
            lines.push(line);
        }
    }
    if lines.is_empty() {
        return None;
    }
    let mut text = format!(
        "Resources of your servers (read one with {}, giving its uri):\n{}",
        NAME.replace('.', "_"),
        lines.join("\n")
    );
    if left_out > 0 {
        text.push_str(&format!("\n({left_out} more not listed here)"));
    }
    Some(Note { text, servers })
}

/// `text`, cut at `max` bytes on a character's boundary, ending in `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Where `resource.read` reads.
pub trait Resources: Send + Sync {
    /// Reads `uri` from `server`, or (when `None`) from the server that listed it, else from
    /// the first server exposing resources: the server read, and the contents.
    fn read(
        &self,
        server: Option<&str>,
        uri: &str,
    ) -> impl Future<Output = Result<(String, Vec<ResourceContents>), Error>> + Send;
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    uri: String,
    server: Option<String>,
}

/// Runs `resource.read` over `resources`: the arguments checked against the tool's schema,
/// then the read.
pub async fn call(resources: &impl Resources, arguments: Value) -> Result<Value, Error> {
    tool().check(&arguments)?;
    let args: ReadArgs = parse(NAME, arguments)?;
    let (server, contents) = resources.read(args.server.as_deref(), &args.uri).await?;
    Ok(json!({"server": server, "uri": args.uri, "contents": contents}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(uri: &str, name: &str) -> Resource {
        serde_json::from_value(json!({"uri": uri, "name": name})).unwrap()
    }

    fn listing(n: usize, prefix: &str) -> Vec<Resource> {
        (0..n)
            .map(|i| resource(&format!("{prefix}://{i}"), &format!("r{i}")))
            .collect()
    }

    #[test]
    fn a_note_lists_at_most_fifty_uris_the_first_server_winning() {
        let a = listing(30, "x");
        let mut b = listing(10, "x");
        b.extend(listing(20, "y"));
        // 30 + 20 distinct: fifty, at the bound.
        let at = note([("a", &a[..]), ("b", &b[..])]).unwrap();
        assert_eq!(
            at.text.lines().filter(|l| l.starts_with("- ")).count(),
            NOTE_MAX
        );
        assert!(!at.text.contains("more not listed"), "{}", at.text);
        assert!(at.text.contains("- x://3 (a): r3"), "{}", at.text);
        assert!(!at.text.contains("- x://3 (b)"), "{}", at.text);
        assert_eq!(at.servers["x://3"], "a");
        assert_eq!(at.servers["y://3"], "b");
        // One past it: left out, and said so; still known for reading.
        b.push(resource("z://1", "z"));
        let past = note([("a", &a[..]), ("b", &b[..])]).unwrap();
        assert_eq!(
            past.text.lines().filter(|l| l.starts_with("- ")).count(),
            NOTE_MAX
        );
        assert!(
            past.text.ends_with("\n(1 more not listed here)"),
            "{}",
            past.text
        );
        assert_eq!(past.servers["z://1"], "b");
        assert_eq!(past.servers.len(), NOTE_MAX + 1);
        assert_eq!(note([("a", &[][..])]), None);
    }

    #[test]
    fn a_long_name_is_cut() {
        let at = [resource("a://1", &"n".repeat(NAME_MAX))];
        let text = note([("s", &at[..])]).unwrap().text;
        assert!(
            text.ends_with(&format!(": {}", "n".repeat(NAME_MAX))),
            "{text}"
        );
        let past = [resource("a://1", &format!("{}é", "n".repeat(NAME_MAX - 1)))];
        let text = note([("s", &past[..])]).unwrap().text;
        assert!(
            text.ends_with(&format!(": {}…", "n".repeat(NAME_MAX - 1))),
            "{text}"
        );
    }

    struct One;

    impl Resources for One {
        async fn read(
            &self,
            server: Option<&str>,
            uri: &str,
        ) -> Result<(String, Vec<ResourceContents>), Error> {
            match uri {
                "a://1" => {
                    let contents = json!([{"uri": uri, "text": "one", "mimeType": "text/plain"}]);
                    let server = server.unwrap_or("s").to_owned();
                    Ok((server, serde_json::from_value(contents).unwrap()))
                }
                _ => Err(Error::NotFound {
                    what: format!("resource {uri:?}"),
                }),
            }
        }
    }

    #[tokio::test]
    async fn read_checks_its_arguments_then_reads() {
        let read = call(&One, json!({"uri": "a://1"})).await.unwrap();
        let schema = tool().output_schema.as_ref().unwrap();
        let valid = jsonschema::draft202012::new(schema).unwrap();
        assert!(valid.is_valid(&read), "{read}");
        assert!(
            !valid
                .is_valid(&json!({"server": "s", "uri": "a://1", "contents": [{"uri": "a://1"}]}))
        );
        assert_eq!(read["server"], "s");
        assert_eq!(read["contents"][0]["text"], "one");
        let on = call(&One, json!({"uri": "a://1", "server": "t"})).await;
        assert_eq!(on.unwrap()["server"], "t");
        let missing = call(&One, json!({"uri": "a://2"})).await.unwrap_err();
        assert_eq!(missing.code(), "not_found");
        for bad in [
            json!({}),
            json!({"uri": ""}),
            json!({"uri": "a://1", "x": 1}),
        ] {
            let refused = call(&One, bad.clone()).await.unwrap_err();
            assert_eq!(refused.code(), "invalid_arguments", "{bad}");
        }
        assert_eq!(tool().grants, &[Grant::Subagent]);
        assert!(crate::tool(NAME).is_none(), "not in the reference's table");
    }
}
