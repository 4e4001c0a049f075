//! `agentd.toml`: read, validated, and every error named by its key and file position.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// The configuration, validated.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Config {
    pub(crate) instance: String,
    pub(crate) servers: Vec<Server>,
    pub(crate) drain_timeout: Duration,
    pub(crate) step_timeout: Duration,
    /// The daemon's HTTP listener (`webhooks.listen`), if configured.
    pub(crate) listen: Option<std::net::SocketAddr>,
    /// The public base URL webhook deliveries come to (`webhooks.url`), if configured.
    pub(crate) hooks_url: Option<String>,
    /// Where durable state is kept (`store.path`).
    pub(crate) store_path: std::path::PathBuf,
    /// The largest value the store keeps (`store.max_value_bytes`).
    pub(crate) max_value_bytes: usize,
    /// MCP Events bindings (`events.bindings`).
    pub(crate) bindings: Vec<Binding>,
    /// Who may make runtime MCP Events subscriptions (`events.grants`).
    pub(crate) grants: Vec<Grant>,
}

/// A grant of runtime MCP Events subscriptions to an owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    /// The owner: `root`, or a workflow's name.
    pub(crate) owner: String,
    /// Its live subscriptions at most (1 to 64, 8 when not set).
    pub(crate) live: Option<u32>,
    /// Whether the `events.*` tools are offered to the owner.
    pub(crate) tools: bool,
}

/// One MCP Events binding: a server's event type appended into a stream.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Binding {
    pub(crate) server: String,
    pub(crate) event: String,
    pub(crate) into: String,
    pub(crate) arguments: serde_json::Map<String, serde_json::Value>,
    pub(crate) delivery: Vec<mcp_wire::events::DeliveryMode>,
    /// At most this many occurrences appended a minute (`max_per_minute`), if bounded.
    pub(crate) max_per_minute: Option<u32>,
}

impl Binding {
    /// Its key ([`key_of`](mcp_events::binding::key_of)): its route, and its cursor's name.
    pub(crate) fn key(&self) -> String {
        mcp_events::binding::key_of(&self.server, &self.event, &self.into, &self.arguments)
    }
}

/// One MCP server.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Server {
    pub(crate) name: String,
    pub(crate) url: String,
    pub(crate) timeout: Duration,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) tags: BTreeMap<String, String>,
}

/// A configuration error: where, which key, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigError {
    pub(crate) file: String,
    pub(crate) line: usize,
    pub(crate) column: usize,
    pub(crate) key: String,
    pub(crate) message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    instance: Option<Spanned<String>>,
    #[serde(default)]
    mcp: Mcp,
    webhooks: Option<Webhooks>,
    store: Option<Store>,
    #[serde(default)]
    events: Events,
    #[serde(default)]
    lifecycle: Lifecycle,
    #[serde(default)]
    limits: Limits,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Mcp {
    default_timeout: Option<Spanned<String>>,
    #[serde(default)]
    servers: Vec<ServerFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerFile {
    name: Spanned<String>,
    url: Spanned<String>,
    timeout: Option<Spanned<String>>,
    #[serde(default)]
    headers: BTreeMap<Spanned<String>, Spanned<String>>,
    #[serde(default)]
    tags: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Webhooks {
    url: Option<Spanned<String>>,
    listen: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Store {
    path: Option<String>,
    max_value_bytes: Option<Spanned<u64>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Events {
    #[serde(default)]
    bindings: Vec<BindingFile>,
    #[serde(default)]
    grants: Vec<GrantFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantFile {
    owner: Spanned<String>,
    live: Option<Spanned<u32>>,
    #[serde(default)]
    tools: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BindingFile {
    server: Spanned<String>,
    event: String,
    into: String,
    #[serde(default)]
    arguments: serde_json::Map<String, serde_json::Value>,
    delivery: Option<Spanned<Vec<String>>>,
    max_per_minute: Option<Spanned<u32>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Lifecycle {
    drain_timeout: Option<Spanned<String>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Limits {
    step_timeout: Option<Spanned<String>>,
}

/// Reads and validates the file at `path`, taking `${VAR}` from `env`.
pub(crate) fn load(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: file.clone(),
        line: 0,
        column: 0,
        key: String::new(),
        message: format!("cannot be read: {e}"),
    })?;
    parse(&file, &text, env)
}

/// Validates configuration `text` (read from `file`).
pub(crate) fn parse(
    file: &str,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let at = |span: Option<Range<usize>>, key: &str, message: String| {
        let (line, column) = span.map_or((0, 0), |s| position(text, s.start));
        ConfigError {
            file: file.to_owned(),
            line,
            column,
            key: key.to_owned(),
            message,
        }
    };
    let raw: File = toml::from_str(text).map_err(|e| at(e.span(), "", e.message().to_owned()))?;
    let duration = |value: &Option<Spanned<String>>, key: &str, default: Duration| match value {
        None => Ok(default),
        Some(v) => parse_duration(v.get_ref()).ok_or_else(|| {
            at(
                Some(v.span()),
                key,
                format!(
                    "{:?} is not a duration like \"500ms\", \"60s\" or \"10m\", more than 0 \
                     and at most 30 days",
                    v.get_ref()
                ),
            )
        }),
    };
    let default_timeout = duration(
        &raw.mcp.default_timeout,
        "mcp.default_timeout",
        Duration::from_secs(60),
    )?;
    let mut servers: Vec<Server> = Vec::new();
    for (i, s) in raw.mcp.servers.iter().enumerate() {
        let key = |k: &str| format!("mcp.servers[{i}].{k}");
        let name = s.name.get_ref().clone();
        if servers.iter().any(|other| other.name == name) {
            return Err(at(
                Some(s.name.span()),
                &key("name"),
                format!("{name:?} names two servers"),
            ));
        }
        let url = s.url.get_ref();
        if !is_http_url(url) {
            return Err(at(
                Some(s.url.span()),
                &key("url"),
                format!("{url:?} is not an http(s) URL"),
            ));
        }
        let mut headers = Vec::new();
        for (header, value) in &s.headers {
            let hkey = key(&format!("headers.{}", header.get_ref()));
            mcp_transport::headers::check_configured(header.get_ref())
                .map_err(|e| at(Some(header.span()), &hkey, e.to_string()))?;
            let value = expand(value.get_ref(), env).map_err(|var| {
                at(
                    Some(value.span()),
                    &hkey,
                    format!("environment variable {var} is not set"),
                )
            })?;
            if hyper::header::HeaderName::from_bytes(header.get_ref().as_bytes()).is_err() {
                return Err(at(
                    Some(header.span()),
                    &hkey,
                    format!("{:?} is not a valid HTTP header name", header.get_ref()),
                ));
            }
            if hyper::header::HeaderValue::from_str(&value).is_err() {
                return Err(at(
                    Some(header.span()),
                    &hkey,
                    "the value is not a valid HTTP header value".to_owned(),
                ));
            }
            headers.push((header.get_ref().clone(), value));
        }
        servers.push(Server {
            name,
            url: url.clone(),
            timeout: duration(&s.timeout, &key("timeout"), default_timeout)?,
            headers,
            tags: s.tags.clone(),
        });
    }
    let listen = match raw.webhooks.as_ref().and_then(|w| w.listen.as_ref()) {
        None => None,
        Some(listen) => Some(listen.get_ref().parse().map_err(|_| {
            at(
                Some(listen.span()),
                "webhooks.listen",
                format!(
                    "{:?} is not an address like \"127.0.0.1:8080\"",
                    listen.get_ref()
                ),
            )
        })?),
    };
    let hooks_url = match raw.webhooks.as_ref().and_then(|w| w.url.as_ref()) {
        None => None,
        Some(url) => {
            if !is_http_url(url.get_ref()) {
                return Err(at(
                    Some(url.span()),
                    "webhooks.url",
                    format!("{:?} is not an http(s) URL", url.get_ref()),
                ));
            }
            Some(url.get_ref().trim_end_matches('/').to_owned())
        }
    };
    let max_value_bytes = match raw.store.as_ref().and_then(|s| s.max_value_bytes.as_ref()) {
        None => 262_144,
        Some(v) if *v.get_ref() >= 1024 => usize::try_from(*v.get_ref()).unwrap_or(usize::MAX),
        Some(v) => {
            return Err(at(
                Some(v.span()),
                "store.max_value_bytes",
                "must be at least 1024".to_owned(),
            ));
        }
    };
    let mut bindings: Vec<Binding> = Vec::new();
    for (i, b) in raw.events.bindings.iter().enumerate() {
        let key = |k: &str| format!("events.bindings[{i}].{k}");
        let server = b.server.get_ref();
        if !servers.iter().any(|s| s.name == *server) {
            return Err(at(
                Some(b.server.span()),
                &key("server"),
                format!("{server:?} is not one of mcp.servers"),
            ));
        }
        let per_server = bindings.iter().filter(|o| o.server == *server).count();
        if per_server >= agentd_tools::runtime::BINDINGS_PER_SERVER
            || bindings.len() >= agentd_tools::runtime::BINDINGS_PER_INSTANCE
        {
            return Err(at(
                Some(b.server.span()),
                &key("server"),
                "past 64 bindings for the server or 256 for the instance".to_owned(),
            ));
        }
        let delivery = match &b.delivery {
            None => vec![mcp_wire::events::DeliveryMode::Poll],
            Some(list) => {
                let modes: Option<Vec<_>> = list
                    .get_ref()
                    .iter()
                    .map(|m| mcp_wire::events::DeliveryMode::parse(m))
                    .collect();
                match modes {
                    Some(modes) if !modes.is_empty() => modes,
                    _ => {
                        return Err(at(
                            Some(list.span()),
                            &key("delivery"),
                            "a list of \"webhook\", \"poll\" or \"push\"".to_owned(),
                        ));
                    }
                }
            }
        };
        if let Some(rate) = &b.max_per_minute
            && *rate.get_ref() == 0
        {
            return Err(at(
                Some(rate.span()),
                &key("max_per_minute"),
                "must be at least 1".to_owned(),
            ));
        }
        if b.into == agentd_tools::runtime::AUDIT_STREAM {
            return Err(at(
                Some(b.server.span()),
                &key("into"),
                format!("{} is agentd's own stream", b.into),
            ));
        }
        bindings.push(Binding {
            server: server.clone(),
            event: b.event.clone(),
            into: b.into.clone(),
            arguments: b.arguments.clone(),
            delivery,
            max_per_minute: b.max_per_minute.as_ref().map(|r| *r.get_ref()),
        });
    }
    let mut grants: Vec<Grant> = Vec::new();
    for (i, g) in raw.events.grants.iter().enumerate() {
        let owner = g.owner.get_ref();
        if owner.is_empty() || grants.iter().any(|o| o.owner == *owner) {
            return Err(at(
                Some(g.owner.span()),
                &format!("events.grants[{i}].owner"),
                format!("{owner:?} is empty or holds a grant already"),
            ));
        }
        if let Some(live) = &g.live
            && let Err(e) = agentd_tools::runtime::Grant::new(owner, Some(*live.get_ref()))
        {
            return Err(at(
                Some(live.span()),
                &format!("events.grants[{i}].live"),
                e.to_string(),
            ));
        }
        grants.push(Grant {
            owner: owner.clone(),
            live: g.live.as_ref().map(|l| *l.get_ref()),
            tools: g.tools,
        });
    }
    Ok(Config {
        grants,
        listen,
        hooks_url,
        store_path: raw
            .store
            .as_ref()
            .and_then(|s| s.path.clone())
            .unwrap_or_else(|| "agentd-data".to_owned())
            .into(),
        max_value_bytes,
        bindings,
        instance: raw
            .instance
            .map_or_else(|| "agentd".to_owned(), Spanned::into_inner),
        servers,
        drain_timeout: duration(
            &raw.lifecycle.drain_timeout,
            "lifecycle.drain_timeout",
            Duration::from_secs(25),
        )?,
        step_timeout: duration(
            &raw.limits.step_timeout,
            "limits.step_timeout",
            Duration::from_secs(600),
        )?,
    })
}

/// Whether `url` is an http(s) URL with a host.
fn is_http_url(url: &str) -> bool {
    url.parse::<hyper::Uri>().is_ok_and(|u| {
        matches!(u.scheme_str(), Some("http" | "https"))
            && u.authority().is_some_and(|a| !a.host().is_empty())
    })
}

/// The 1-based line and column of byte `offset`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The longest duration a configuration may give.
const DURATION_MAX: Duration = Duration::from_secs(30 * 24 * 3600);

/// A duration as `humantime` reads it (`"500ms"`, `"60s"`, `"10m"`, `"1h 30m"`, `"7d"`): more
/// than 0, at most 30 days.
pub(crate) fn parse_duration(text: &str) -> Option<Duration> {
    let d = humantime::parse_duration(text).ok()?;
    (!d.is_zero() && d <= DURATION_MAX).then_some(d)
}

/// Replaces every `${VAR}` with the variable's value; the name of a missing one.
fn expand(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let Some(len) = rest[start + 2..].find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let name = &rest[start + 2..start + 2 + len];
        out.push_str(&env(name).ok_or_else(|| name.to_owned())?);
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"instance = "my-agent"
[mcp]
default_timeout = "60s"
[[mcp.servers]]
name = "weather"
url = "http://127.0.0.1:8765/mcp"
timeout = "30s"
headers = { Authorization = "Bearer ${WEATHER_TOKEN}" }
tags = { team = "ops" }
[[mcp.servers]]
name = "files"
url = "https://files.example/mcp"
[webhooks]
url = "https://agent.example.com"
listen = "127.0.0.1:8080"
[store]
path = "agentd-data"
max_value_bytes = 262144
[lifecycle]
drain_timeout = "25s"
[limits]
step_timeout = "600s"
"#;

    fn env(name: &str) -> Option<String> {
        (name == "WEATHER_TOKEN").then(|| "s3cret".to_owned())
    }

    fn err(text: &str) -> ConfigError {
        parse("agentd.toml", text, &env).expect_err("refused")
    }

    #[test]
    fn the_example_loads() {
        let c = parse("agentd.toml", EXAMPLE, &env).unwrap();
        assert_eq!(c.instance, "my-agent");
        assert_eq!(c.servers[0].timeout, Duration::from_secs(30));
        assert_eq!(
            c.servers[1].timeout,
            Duration::from_secs(60),
            "mcp.default_timeout"
        );
        assert_eq!(
            c.servers[0].headers,
            [("Authorization".to_owned(), "Bearer s3cret".to_owned())]
        );
        assert_eq!(c.servers[0].tags["team"], "ops");
        assert_eq!(c.drain_timeout, Duration::from_secs(25));
        assert_eq!(c.step_timeout, Duration::from_secs(600));
    }

    #[test]
    fn an_unknown_key_is_named_with_its_position() {
        let e = err("instance = \"a\"\n[mcp]\ndefault_timout = \"60s\"\n");
        assert_eq!((e.line, e.column), (3, 1), "{e}");
        assert!(e.to_string().contains("default_timout"), "{e}");
        assert!(e.to_string().starts_with("agentd.toml:3:1: "), "{e}");
    }

    #[test]
    fn a_bad_duration_is_named() {
        let e = err("[mcp]\ndefault_timeout = \"sixty\"\n");
        assert_eq!(e.key, "mcp.default_timeout");
        assert_eq!((e.line, e.column), (2, 19));
        for bad in [
            "60",
            "-1s",
            "31d",
            "0s",
            "0ms",
            "2592001s",
            "9300000000000000000s",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
        assert_eq!(
            parse_duration("720h"),
            Some(Duration::from_secs(2_592_000)),
            "30 days is the bound"
        );
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h 30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("7d"), Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn a_missing_variable_is_named() {
        let e = err(
            "[[mcp.servers]]\nname = \"a\"\nurl = \"http://x/mcp\"\nheaders = { X-Key = \"${NOPE}\" }\n",
        );
        assert_eq!(e.key, "mcp.servers[0].headers.X-Key");
        assert!(e.message.contains("NOPE"), "{e}");
        assert_eq!(e.line, 4);
    }

    #[test]
    fn a_listen_address_must_be_an_address() {
        let e = err("[webhooks]\nlisten = \"localhost\"\n");
        assert_eq!(e.key, "webhooks.listen");
        assert_eq!((e.line, e.column), (2, 10));
        let c = parse(
            "agentd.toml",
            "[webhooks]\nlisten = \"127.0.0.1:0\"\n",
            &env,
        )
        .unwrap();
        assert_eq!(c.listen, Some("127.0.0.1:0".parse().unwrap()));
    }

    #[test]
    fn duplicate_server_names_are_refused() {
        let e = err(
            "[[mcp.servers]]\nname = \"a\"\nurl = \"http://x/mcp\"\n[[mcp.servers]]\nname = \"a\"\nurl = \"http://y/mcp\"\n",
        );
        assert_eq!(e.key, "mcp.servers[1].name");
        assert_eq!(e.line, 5);
    }

    #[test]
    fn a_url_that_is_not_http_is_refused() {
        for url in [
            "ftp://x/mcp",
            "x/mcp",
            "unix:///tmp/s",
            "http://",
            "http://a b/",
            "https:///mcp",
        ] {
            let e = err(&format!("[[mcp.servers]]\nname = \"a\"\nurl = \"{url}\"\n"));
            assert_eq!(e.key, "mcp.servers[0].url", "{url}");
        }
    }

    #[test]
    fn bindings_name_a_server_known_modes_and_stay_within_their_limits() {
        let server = "[[mcp.servers]]\nname = \"t\"\nurl = \"http://x/mcp\"\n";
        let binding = |event: usize| {
            format!("[[events.bindings]]\nserver = \"t\"\nevent = \"e{event}\"\ninto = \"s\"\n")
        };
        let c = parse(
            "agentd.toml",
            &format!("{server}{}delivery = [\"webhook\", \"poll\"]\n", binding(0)),
            &env,
        )
        .unwrap();
        assert_eq!(
            c.bindings[0].delivery,
            [
                mcp_wire::events::DeliveryMode::Webhook,
                mcp_wire::events::DeliveryMode::Poll
            ]
        );
        assert_eq!(c.max_value_bytes, 262_144);
        assert_eq!(c.store_path, std::path::PathBuf::from("agentd-data"));
        let e = err(&format!(
            "{server}[[events.bindings]]\nserver = \"nope\"\nevent = \"e\"\ninto = \"s\"\n"
        ));
        assert_eq!((e.key.as_str(), e.line), ("events.bindings[0].server", 5));
        let e = err(&format!(
            "{server}{}delivery = [\"carrier-pigeon\"]\n",
            binding(0)
        ));
        assert_eq!(e.key, "events.bindings[0].delivery");
        let e = err(&format!("{server}{}delivery = []\n", binding(0)));
        assert_eq!(e.key, "events.bindings[0].delivery");
        // 64 bindings of one server load; the 65th is refused.
        let sixty_four: String = (0..64).map(binding).collect();
        assert_eq!(
            parse("agentd.toml", &format!("{server}{sixty_four}"), &env)
                .unwrap()
                .bindings
                .len(),
            64
        );
        let e = err(&format!("{server}{sixty_four}{}", binding(64)));
        assert_eq!(e.key, "events.bindings[64].server");
        // 256 for the instance: four servers of 64 load; one more anywhere is refused.
        let servers: String = (0..5)
            .map(|i| format!("[[mcp.servers]]\nname = \"t{i}\"\nurl = \"http://x/mcp\"\n"))
            .collect();
        let on = |server: usize, event: usize| {
            format!(
                "[[events.bindings]]\nserver = \"t{server}\"\nevent = \"e{event}\"\ninto = \"s\"\n"
            )
        };
        let full: String = (0..256).map(|n| on(n / 64, n)).collect();
        let c = parse("agentd.toml", &format!("{servers}{full}"), &env).unwrap();
        assert_eq!(c.bindings.len(), 256);
        let e = err(&format!("{servers}{full}{}", on(4, 256)));
        assert_eq!(e.key, "events.bindings[256].server");
        let e = err("[store]\nmax_value_bytes = 1023\n");
        assert_eq!(e.key, "store.max_value_bytes");
        let c = parse("agentd.toml", "[store]\nmax_value_bytes = 1024\n", &env).unwrap();
        assert_eq!(c.max_value_bytes, 1024, "the bound itself loads");
        let e = err(&format!("{server}{}max_per_minute = 0\n", binding(0)));
        assert_eq!(e.key, "events.bindings[0].max_per_minute");
        let c = parse(
            "agentd.toml",
            &format!("{server}{}max_per_minute = 1\n", binding(0)),
            &env,
        )
        .unwrap();
        assert_eq!(c.bindings[0].max_per_minute, Some(1));
        let e = err("[webhooks]\nurl = \"agent.example.com\"\n");
        assert_eq!(e.key, "webhooks.url");
    }

    #[test]
    fn grants_name_one_owner_each_and_allow_1_to_64() {
        let c = parse(
            "f",
            "[[events.grants]]\nowner = \"root\"\ntools = true\n\
             [[events.grants]]\nowner = \"nightly\"\nlive = 64\n",
            &env,
        )
        .unwrap();
        assert_eq!(
            c.grants,
            [
                Grant {
                    owner: "root".into(),
                    live: None,
                    tools: true
                },
                Grant {
                    owner: "nightly".into(),
                    live: Some(64),
                    tools: false
                }
            ]
        );
        let e = err("[[events.grants]]\nowner = \"root\"\nlive = 65\n");
        assert_eq!((e.key.as_str(), e.line), ("events.grants[0].live", 3));
        assert!(e.message.contains("1 to 64"), "{e}");
        let e = err("[[events.grants]]\nowner = \"root\"\nlive = 0\n");
        assert_eq!(e.key, "events.grants[0].live");
        let e = err("[[events.grants]]\nowner = \"a\"\n[[events.grants]]\nowner = \"a\"\n");
        assert_eq!((e.key.as_str(), e.line), ("events.grants[1].owner", 4));
        let e = err("[[events.grants]]\nowner = \"\"\n");
        assert_eq!(e.key, "events.grants[0].owner");
        let e = err(
            "[[mcp.servers]]\nname = \"t\"\nurl = \"http://127.0.0.1:1/mcp\"\n\
             [[events.bindings]]\nserver = \"t\"\nevent = \"e\"\ninto = \"agentd.audit\"\n",
        );
        assert_eq!(e.key, "events.bindings[0].into");
    }

    #[test]
    fn headers_that_are_not_http_are_refused() {
        let e = err(
            "[[mcp.servers]]\nname = \"a\"\nurl = \"http://x/mcp\"\nheaders = { \"X Bad\" = \"v\" }\n",
        );
        assert_eq!(
            (e.key.as_str(), e.line),
            ("mcp.servers[0].headers.X Bad", 4)
        );
        assert!(e.message.contains("header name"), "{e}");
        let e = err(
            "[[mcp.servers]]\nname = \"a\"\nurl = \"http://x/mcp\"\nheaders = { X-Ok = \"a\\nb\" }\n",
        );
        assert_eq!(e.key, "mcp.servers[0].headers.X-Ok");
        assert!(e.message.contains("header value"), "{e}");
    }

    #[test]
    fn headers_the_client_sets_are_refused_in_any_case() {
        for header in [
            "MCP-Protocol-Version",
            "mcp-method",
            "MCP-NAME",
            "Mcp-Param-Region",
            "mcp-param-x",
            "Mcp-Session-Id",
            "last-event-id",
        ] {
            let e = err(&format!(
                "[[mcp.servers]]\nname = \"a\"\nurl = \"http://x/mcp\"\nheaders = {{ {header} = \"v\" }}\n"
            ));
            assert!(e.message.contains(header), "{e}");
            assert_eq!(e.line, 4, "{e}");
        }
    }
}
