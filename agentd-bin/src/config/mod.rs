//! `agentd.toml`: read, validated, and every error named by its key and file position.

mod contracts;
mod file;
pub(crate) mod security;

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use agentd_tools::Scope;
use agentd_tools::memory::VALUE_MAX_LEAST;
use toml::Spanned;

pub(crate) use self::contracts::{Contracts, Implementation};
use self::file::File;

/// `store.max_value_bytes` when the file says nothing.
pub(crate) const MAX_VALUE_BYTES: usize = agentd_tools::memory::VALUE_MAX_DEFAULT;

/// How many servers `mcp.servers` may name: each is a held connection (and its streams)
/// counted in the daemon's descriptor budget.
pub(crate) const SERVERS_MAX: usize = 128;

/// `limits.run_concurrency` when the file says nothing: workflow runs under way at once.
pub(crate) const RUN_CONCURRENCY: usize = 256;

/// The most `limits.run_concurrency` may be.
pub(crate) const RUN_CONCURRENCY_MAX: usize = 4096;

/// `limits.run_retention` when the file says nothing: how long an ended workflow run is
/// kept, 7 days.
pub(crate) const RUN_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The least `limits.run_retention` may be: the period of the prune, so that a run is not
/// gone before its callers had an hour to read it.
pub(crate) const RUN_RETENTION_MIN: Duration = Duration::from_secs(3600);

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
    /// Which of agentd's own tools each scope is offered (`[tools.grants]`).
    pub(crate) tool_grants: agentd_tools::Grants,
    /// The model the agent's turns ask (`[model]`); without one the agent runs no turns.
    pub(crate) model: Option<Model>,
    /// The longest a turn may take, its tool calls and retries included
    /// (`limits.turn_timeout`, 600 s when not set).
    pub(crate) turn_timeout: Duration,
    /// The tokens the agent may spend, if bounded (`limits.budget_tokens`).
    pub(crate) budget_tokens: Option<u64>,
    /// Workflow runs under way at once (`limits.run_concurrency`, 1 to [`RUN_CONCURRENCY_MAX`],
    /// [`RUN_CONCURRENCY`] when not set).
    pub(crate) run_concurrency: usize,
    /// How long an ended workflow run is kept (`limits.run_retention`, [`RUN_RETENTION`]
    /// when not set).
    pub(crate) run_retention: Duration,
    /// The instruction (`[instruction]`), if configured.
    pub(crate) instruction: Option<Instruction>,
    /// The servers whose prompts are the skills (`skills.sources`), in their order.
    pub(crate) skill_sources: Vec<String>,
    /// The workflows (`[[workflows]]`), each checked whole.
    pub(crate) workflows: Vec<agentd_tools::workflow::Definition>,
    /// The local command runner's policy when `exec` runs commands here
    /// (`security.exec.enabled`); `None`: it does not.
    #[cfg_attr(
        not(feature = "exec"),
        allow(
            dead_code,
            reason = "always None: without the feature, enabled is refused"
        )
    )]
    pub(crate) exec: Option<security::Exec>,
    /// The contract tools' implementations (`[knowledge]`, `[search]`, `[contracts.map]`).
    pub(crate) contracts: Contracts,
}

impl Config {
    /// The bounds of workflow runs: `limits.step_timeout` and `store.max_value_bytes`.
    pub(crate) fn run_limits(&self) -> agentd_tools::workflow::run::Limits {
        agentd_tools::workflow::run::Limits::new(self.step_timeout, self.max_value_bytes)
    }
}

/// The model the agent's turns ask: an OpenAI-compatible Chat Completions endpoint. Its
/// `Debug` never shows the API key.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Model {
    /// The API's base URL, `…/chat/completions` appended (`base_url`, e.g.
    /// `https://api.openai.com/v1`).
    pub(crate) base_url: String,
    /// The model's name (`model`).
    pub(crate) model: String,
    /// The key sent as `Authorization: Bearer …` (`api_key`, `${VAR}` expanded), if any.
    pub(crate) api_key: Option<String>,
    /// The most tokens one answer may be (`max_output_tokens`), if bounded.
    pub(crate) max_output_tokens: Option<u64>,
}

impl fmt::Debug for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Model")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "…"))
            .field("max_output_tokens", &self.max_output_tokens)
            .finish()
    }
}

/// `[instruction]`: the resource read as the system prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Instruction {
    /// The server, one of `mcp.servers`.
    pub(crate) server: String,
    /// The resource's URI: a concrete URI, not a template.
    pub(crate) uri: String,
    /// How often it is read again when its server offers no subscriptions (`refresh`,
    /// [`REFRESH`] when not set).
    pub(crate) refresh: Duration,
}

/// `instruction.refresh` when the file says nothing.
pub(crate) const REFRESH: Duration = Duration::from_secs(5 * 60);

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

impl std::error::Error for ConfigError {}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)
    }
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
        if servers.len() == SERVERS_MAX {
            return Err(at(
                Some(s.name.span()),
                &key("name"),
                format!("past {SERVERS_MAX} servers"),
            ));
        }
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
        None => MAX_VALUE_BYTES,
        Some(v) => {
            // Past what an address holds is as good as no bound.
            let bytes = usize::try_from(*v.get_ref()).unwrap_or(usize::MAX);
            if bytes >= VALUE_MAX_LEAST {
                bytes
            } else {
                return Err(at(
                    Some(v.span()),
                    "store.max_value_bytes",
                    format!("must be at least {VALUE_MAX_LEAST}"),
                ));
            }
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
        let binding = Binding {
            server: server.clone(),
            event: b.event.clone(),
            into: b.into.clone(),
            arguments: b.arguments.clone(),
            delivery,
            max_per_minute: b.max_per_minute.as_ref().map(|r| *r.get_ref()),
        };
        // A binding is its server, type, stream and arguments: two of them would share a
        // cursor and a webhook route.
        if let Some(j) = bindings.iter().position(|o| o.key() == binding.key()) {
            return Err(at(
                Some(b.server.span()),
                &key("server"),
                format!(
                    "the same binding as events.bindings[{j}] (server, event, into, arguments)"
                ),
            ));
        }
        bindings.push(binding);
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
    let scoped = [
        (Scope::Root, &raw.tools.grants.root),
        (Scope::Workflow, &raw.tools.grants.workflow),
        (Scope::Subagent, &raw.tools.grants.subagent),
    ];
    // Each pattern checked alone, so that an error names its key and position.
    for (scope, patterns) in scoped {
        for (i, pattern) in patterns.iter().flatten().enumerate() {
            if let Err(e) = agentd_tools::Grants::new([(scope, [pattern.get_ref()])]) {
                return Err(at(
                    Some(pattern.span()),
                    &format!("tools.grants.{scope}[{i}]"),
                    e.to_string(),
                ));
            }
        }
    }
    let model = match &raw.model {
        None => None,
        Some(m) => Some(model(m, env, &at)?),
    };
    let budget_tokens = positive(&raw.limits.budget_tokens, "limits.budget_tokens", &at)?;
    let run_concurrency = match &raw.limits.run_concurrency {
        None => RUN_CONCURRENCY,
        Some(v) => usize::try_from(*v.get_ref())
            .ok()
            .filter(|n| (1..=RUN_CONCURRENCY_MAX).contains(n))
            .ok_or_else(|| {
                let message = format!("must be 1 to {RUN_CONCURRENCY_MAX}");
                at(Some(v.span()), "limits.run_concurrency", message)
            })?,
    };
    let tool_grants = agentd_tools::Grants::new(scoped.iter().filter_map(|(scope, patterns)| {
        let patterns = patterns.as_ref()?;
        Some((*scope, patterns.iter().map(|p| p.get_ref().as_str())))
    }))
    .map_err(|e| at(None, "tools.grants", e.to_string()))?;
    let configured =
        |name: &Spanned<String>, key: &str| match servers.iter().any(|s| s.name == *name.get_ref())
        {
            true => Ok(name.get_ref().clone()),
            false => Err(at(
                Some(name.span()),
                key,
                format!("{:?} is not one of mcp.servers", name.get_ref()),
            )),
        };
    let instruction = match &raw.instruction {
        None => None,
        Some(i) => {
            let uri = i.uri.get_ref();
            if let Err(rule) = agentd_tools::instruction::check_uri(uri) {
                return Err(at(
                    Some(i.uri.span()),
                    "instruction.uri",
                    format!("{uri:?} is not {rule}"),
                ));
            }
            Some(Instruction {
                server: configured(&i.server, "instruction.server")?,
                uri: uri.clone(),
                refresh: duration(&i.refresh, "instruction.refresh", REFRESH)?,
            })
        }
    };
    let mut skill_sources: Vec<String> = Vec::new();
    for (i, source) in raw.skills.sources.iter().enumerate() {
        let key = format!("skills.sources[{i}]");
        let name = configured(source, &key)?;
        if skill_sources.contains(&name) {
            return Err(at(
                Some(source.span()),
                &key,
                format!("{name:?} is listed twice"),
            ));
        }
        skill_sources.push(name);
    }
    let workflows = workflows(&raw.workflows, &at)?;
    let exec = security::exec(&raw.security, &duration, &at)?;
    let contracts = contracts::contracts(
        [
            ("knowledge", raw.knowledge.as_ref()),
            ("search", raw.search.as_ref()),
        ],
        &raw.contracts.map,
        &|name| servers.iter().any(|s| s.name == name),
        exec.is_some(),
        &at,
    )?;
    let run_retention = duration(
        &raw.limits.run_retention,
        "limits.run_retention",
        RUN_RETENTION,
    )?;
    if run_retention < RUN_RETENTION_MIN {
        let span = raw.limits.run_retention.as_ref().map(|v| v.span());
        let message = "must be at least 1h (ended runs are pruned every hour)".to_owned();
        return Err(at(span, "limits.run_retention", message));
    }
    Ok(Config {
        workflows,
        exec,
        contracts,
        model,
        budget_tokens,
        run_concurrency,
        run_retention,
        turn_timeout: duration(
            &raw.limits.turn_timeout,
            "limits.turn_timeout",
            Duration::from_secs(600),
        )?,
        instruction,
        skill_sources,
        grants,
        tool_grants,
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

/// Makes the error of a key at a position of the file, with its message.
type At<'a> = dyn Fn(Option<Range<usize>>, &str, String) -> ConfigError + 'a;

/// Checks `[[workflows]]`: each a `name` and a definition's body, checked whole; an error
/// names the key inside it (`workflows[0].steps[1].arguments.city`) at the workflow's
/// position.
fn workflows(
    raw: &[Spanned<toml::Table>],
    at: &At<'_>,
) -> Result<Vec<agentd_tools::workflow::Definition>, ConfigError> {
    let mut workflows: Vec<agentd_tools::workflow::Definition> = Vec::new();
    for (i, table) in raw.iter().enumerate() {
        let span = || Some(table.span());
        let mut body = table.get_ref().clone();
        let Some(toml::Value::String(name)) = body.remove("name") else {
            return Err(at(
                span(),
                &format!("workflows[{i}].name"),
                "a string is needed".into(),
            ));
        };
        if workflows.iter().any(|w| w.name == name) {
            let key = format!("workflows[{i}].name");
            return Err(at(span(), &key, format!("{name:?} names two workflows")));
        }
        let body = serde_json::to_value(&body)
            .map_err(|e| at(span(), &format!("workflows[{i}]"), format!("not JSON: {e}")))?;
        let definition = agentd_tools::workflow::Definition::parse(&name, &body).map_err(|e| {
            let key = format!("workflows[{i}]{}", key_of(&e.pointer));
            at(span(), &key, format!("{} ({})", e, e.rule))
        })?;
        workflows.push(definition);
    }
    Ok(workflows)
}

/// A JSON pointer as a configuration key's tail: `/steps/1/id` is `.steps[1].id`.
fn key_of(pointer: &str) -> String {
    pointer
        .split('/')
        .skip(1)
        .map(|token| {
            let token = token.replace("~1", "/").replace("~0", "~");
            match token.parse::<usize>() {
                Ok(i) => format!("[{i}]"),
                Err(_) => format!(".{token}"),
            }
        })
        .collect()
}

/// Validates `[model]`.
fn model(
    m: &file::ModelFile,
    env: &dyn Fn(&str) -> Option<String>,
    at: &At<'_>,
) -> Result<Model, ConfigError> {
    let base_url = m.base_url.get_ref();
    if !is_http_url(base_url) {
        return Err(at(
            Some(m.base_url.span()),
            "model.base_url",
            format!("{base_url:?} is not an http(s) URL"),
        ));
    }
    if m.model.get_ref().trim().is_empty() {
        return Err(at(
            Some(m.model.span()),
            "model.model",
            "names no model".to_owned(),
        ));
    }
    let api_key = match &m.api_key {
        None => None,
        Some(key) => {
            let value = expand(key.get_ref(), env).map_err(|var| {
                at(
                    Some(key.span()),
                    "model.api_key",
                    format!("environment variable {var} is not set"),
                )
            })?;
            let bearer = hyper::header::HeaderValue::from_str(&format!("Bearer {value}"));
            if value.is_empty() || bearer.is_err() {
                return Err(at(
                    Some(key.span()),
                    "model.api_key",
                    "is empty or not valid in an HTTP header".to_owned(),
                ));
            }
            Some(value)
        }
    };
    Ok(Model {
        base_url: base_url.trim_end_matches('/').to_owned(),
        model: m.model.get_ref().clone(),
        api_key,
        max_output_tokens: positive(&m.max_output_tokens, "model.max_output_tokens", at)?,
    })
}

/// A count that, when given, is at least 1.
fn positive(
    value: &Option<Spanned<u64>>,
    key: &str,
    at: &At<'_>,
) -> Result<Option<u64>, ConfigError> {
    match value {
        Some(v) if *v.get_ref() == 0 => {
            Err(at(Some(v.span()), key, "must be at least 1".to_owned()))
        }
        v => Ok(v.as_ref().map(|v| *v.get_ref())),
    }
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
mod tests;
