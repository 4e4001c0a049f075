//! The configuration's tests: every key, its default, and every error named.

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
turn_timeout = "15m"
budget_tokens = 2000000
[model]
base_url = "https://api.openai.com/v1/"
model = "gpt-4.1"
api_key = "${OPENAI_API_KEY}"
max_output_tokens = 4096
"#;

fn env(name: &str) -> Option<String> {
    match name {
        "WEATHER_TOKEN" => Some("s3cret".to_owned()),
        "OPENAI_API_KEY" => Some("sk-k3y".to_owned()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
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
    assert_eq!(c.turn_timeout, Duration::from_secs(900));
    assert_eq!(c.budget_tokens, Some(2_000_000));
    assert_eq!(
        c.model,
        Some(Model {
            base_url: "https://api.openai.com/v1".to_owned(),
            model: "gpt-4.1".to_owned(),
            api_key: Some("sk-k3y".to_owned()),
            max_output_tokens: Some(4096),
        })
    );
    assert!(
        !format!("{c:?}").contains("sk-k3y"),
        "the key is never shown"
    );
}

#[test]
fn without_a_model_the_configuration_is_valid_and_limits_have_defaults() {
    let c = parse("agentd.toml", "", &env).unwrap();
    assert_eq!(c.model, None);
    assert_eq!(c.turn_timeout, Duration::from_secs(600));
    assert_eq!(c.budget_tokens, None);
    assert_eq!(c.run_concurrency, RUN_CONCURRENCY);
    assert_eq!(c.run_retention, Duration::from_secs(7 * 24 * 3600));
    let c = parse(
        "agentd.toml",
        "[model]\nbase_url = \"http://127.0.0.1:8080/v1\"\nmodel = \"local\"\n",
        &env,
    )
    .unwrap();
    let model = c.model.unwrap();
    assert_eq!((model.api_key, model.max_output_tokens), (None, None));
}

#[test]
fn model_errors_are_named() {
    let model = |rest: &str| format!("[model]\nbase_url = \"http://x/v1\"\nmodel = \"m\"\n{rest}");
    let cases = [
        (
            "[model]\nbase_url = \"ftp://x/v1\"\nmodel = \"m\"\n".to_owned(),
            "model.base_url",
            (2, 12),
            "not an http(s) URL",
        ),
        (
            "[model]\nbase_url = \"http://x/v1\"\nmodel = \" \"\n".to_owned(),
            "model.model",
            (3, 9),
            "names no model",
        ),
        (
            model("api_key = \"${NOPE}\"\n"),
            "model.api_key",
            (4, 11),
            "NOPE is not set",
        ),
        (
            model("api_key = \"${EMPTY}\"\n"),
            "model.api_key",
            (4, 11),
            "is empty",
        ),
        (
            model("api_key = \"a\\nb\"\n"),
            "model.api_key",
            (4, 11),
            "not valid in an HTTP header",
        ),
        (
            model("max_output_tokens = 0\n"),
            "model.max_output_tokens",
            (4, 21),
            "at least 1",
        ),
        (
            "[limits]\nbudget_tokens = 0\n".to_owned(),
            "limits.budget_tokens",
            (2, 17),
            "at least 1",
        ),
        (
            "[limits]\nturn_timeout = \"forever\"\n".to_owned(),
            "limits.turn_timeout",
            (2, 16),
            "not a duration",
        ),
    ];
    for (text, key, at, message) in cases {
        let e = err(&text);
        assert_eq!(e.key, key, "{e}");
        assert_eq!((e.line, e.column), at, "{e}");
        assert!(e.message.contains(message), "{e}");
    }
    for text in [
        model("max_output_tokens = -1\n"),
        model("temperature = 0.2\n"),
        "[model]\nbase_url = \"http://x/v1\"\n".to_owned(),
        "[limits]\nbudget_tokens = \"many\"\n".to_owned(),
    ] {
        let e = err(&text);
        assert!(e.line > 0, "{e}");
    }
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

/// 128 servers load; the 129th is refused, named.
#[test]
fn servers_are_bounded() {
    let server = |i: usize| format!("[[mcp.servers]]\nname = \"s{i}\"\nurl = \"http://x/mcp\"\n");
    let full: String = (0..SERVERS_MAX).map(server).collect();
    let c = parse("agentd.toml", &full, &env).unwrap();
    assert_eq!(c.servers.len(), 128);
    let e = err(&format!("{full}{}", server(SERVERS_MAX)));
    assert_eq!(e.key, "mcp.servers[128].name");
    assert!(e.to_string().contains("past 128 servers"), "{e}");
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
        format!("[[events.bindings]]\nserver = \"t{server}\"\nevent = \"e{event}\"\ninto = \"s\"\n")
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
fn tool_grants_narrow_per_scope_and_a_bad_pattern_is_named() {
    let c = parse(
        "f",
        "[tools.grants]\nsubagent = [\"memory.*\", \"status\"]\nworkflow = []\n",
        &env,
    )
    .unwrap();
    let g = &c.tool_grants;
    assert!(g.offers(Scope::Subagent, "memory.shift"));
    assert!(!g.offers(Scope::Subagent, "plan.get"));
    assert!(
        !g.offers(Scope::Workflow, "status"),
        "an empty list offers nothing"
    );
    assert!(g.offers(Scope::Root, "plan.get"), "root keeps its defaults");
    assert_eq!(
        parse("f", "", &env).unwrap().tool_grants,
        agentd_tools::Grants::default()
    );
    let e = err("[tools.grants]\nroot = [\"memory.get\",\n  \"memory.fetch\"]\n");
    assert_eq!(
        (e.key.as_str(), e.line, e.column),
        ("tools.grants.root[1]", 3, 3)
    );
    assert!(e.message.contains("no tool is named"), "{e}");
    let e = err("[tools.grants]\nsubagent = [\"subagent.*\"]\n");
    assert_eq!(e.key, "tools.grants.subagent[0]");
    assert!(e.message.contains("grants only narrow"), "{e}");
    let e = err("[tools.grants]\noperator = []\n");
    assert_eq!(e.line, 2, "{e}");
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

#[test]
fn a_binding_given_twice_is_refused() {
    let binding = "[[events.bindings]]\nserver = \"a\"\nevent = \"e\"\ninto = \"s\"\n";
    let text = format!(
        "[[mcp.servers]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\n{binding}{binding}\
         delivery = [\"poll\"]\n"
    );
    let err = parse("f", &text, &|_| None).unwrap_err();
    assert_eq!(err.key, "events.bindings[1].server", "{err}");
    assert!(err.message.contains("events.bindings[0]"), "{err}");
}

#[test]
fn the_instruction_and_the_skills_name_configured_servers() {
    let servers = "[[mcp.servers]]\nname = \"docs\"\nurl = \"http://127.0.0.1:1/mcp\"\n\
                   [[mcp.servers]]\nname = \"kit\"\nurl = \"http://127.0.0.1:2/mcp\"\n";
    let c = parse("agentd.toml", servers, &env).unwrap();
    assert_eq!((c.instruction, c.skill_sources.len()), (None, 0));
    let text = format!(
        "{servers}[instruction]\nserver = \"docs\"\nuri = \"docs://instruction\"\n\
         [skills]\nsources = [\"kit\", \"docs\"]\n"
    );
    let c = parse("agentd.toml", &text, &env).unwrap();
    assert_eq!(
        c.instruction,
        Some(Instruction {
            server: "docs".into(),
            uri: "docs://instruction".into(),
            refresh: REFRESH,
        })
    );
    assert_eq!(REFRESH, Duration::from_secs(300));
    assert_eq!(c.skill_sources, ["kit", "docs"]);
    let text = format!(
        "{servers}[instruction]\nserver = \"docs\"\nuri = \"docs://i\"\nrefresh = \"30s\"\n"
    );
    let c = parse("agentd.toml", &text, &env).unwrap();
    assert_eq!(c.instruction.unwrap().refresh, Duration::from_secs(30));

    // (text, key, what the error says, line)
    let cases = [
        (
            "[instruction]\nserver = \"nope\"\nuri = \"docs://i\"\n",
            "instruction.server",
            "\"nope\" is not one of mcp.servers",
            8,
        ),
        (
            "[instruction]\nserver = \"docs\"\nuri = \"docs://{name}\"\n",
            "instruction.uri",
            "not a template",
            9,
        ),
        (
            "[instruction]\nserver = \"docs\"\nuri = \"\"\n",
            "instruction.uri",
            "a concrete resource URI",
            9,
        ),
        (
            "[instruction]\nserver = \"docs\"\nuri = \"docs://i\"\nrefresh = \"0s\"\n",
            "instruction.refresh",
            "not a duration",
            10,
        ),
        (
            "[skills]\nsources = [\"kit\", \"nope\"]\n",
            "skills.sources[1]",
            "\"nope\" is not one of mcp.servers",
            8,
        ),
        (
            "[skills]\nsources = [\"kit\", \"kit\"]\n",
            "skills.sources[1]",
            "\"kit\" is listed twice",
            8,
        ),
    ];
    for (tail, key, says, line) in cases {
        let e = err(&format!("{servers}{tail}"));
        assert_eq!(e.key, key, "{e}");
        assert!(e.message.contains(says), "{e}");
        assert_eq!(e.line, line, "{e}");
    }
    let e = err(&format!("{servers}[instruction]\nserver = \"docs\"\n"));
    assert!(e.message.contains("uri"), "{e}");
    let e = err(&format!("{servers}[skills]\nsource = [\"kit\"]\n"));
    assert!(e.message.contains("source"), "{e}");
}

#[test]
fn workflows_are_checked_whole_and_an_error_names_the_key() {
    let text = r#"
[[workflows]]
name = "weather"
labels = { team = "ops" }
[[workflows.steps]]
id = "fetch"
type = "mcp.tool"
server = "weather"
tool = "get"
arguments = { city = "{{input.city}}" }
retries = { max = 2, delay = "1s" }
[[workflows.steps]]
id = "wait"
type = "wait"
on = { duration = "5m" }
"#;
    let c = parse("agentd.toml", text, &env).unwrap();
    assert_eq!(c.workflows.len(), 1);
    let weather = &c.workflows[0];
    assert_eq!(weather.name, "weather");
    assert_eq!(weather.steps.len(), 2);
    assert_eq!(weather.labels["team"], "ops");
    assert_eq!(c.run_limits().step_timeout, Duration::from_secs(600));

    let bad = text.replace("{{input.city}}", "{{steps.later.output}}");
    let e = err(&bad);
    assert_eq!(e.key, "workflows[0].steps[0].arguments.city");
    assert_eq!((e.line, e.column), (2, 1), "{e}");
    assert!(e.message.contains("step \"fetch\""), "{e}");
    assert!(e.message.contains("(template)"), "{e}");

    let twice = format!("{text}{text}");
    assert_eq!(err(&twice).key, "workflows[1].name");
    let nameless = text.replace("name = \"weather\"\n", "");
    assert_eq!(err(&nameless).key, "workflows[0].name");
    let unknown = text.replace("retries = { max = 2", "retries = { most = 2");
    assert_eq!(err(&unknown).key, "workflows[0].steps[0]");
    let starts = format!("{text}[[workflows.starts]]\nsubscribe = {{}}\n");
    let e = err(&starts);
    assert_eq!(e.key, "workflows[0].starts[0]");
    assert!(e.message.contains("(shape)"), "{e}");
}

#[test]
fn exec_is_off_unless_enabled_and_its_policy_has_defaults() {
    let c = parse("agentd.toml", "", &env).unwrap();
    assert_eq!(c.exec, None);
    let off = parse("agentd.toml", "[security.exec]\nenabled = false\n", &env).unwrap();
    assert_eq!(off.exec, None);
    let policy = security::Exec::default();
    assert_eq!(
        (
            policy.timeout,
            policy.timeout_max,
            policy.output_max,
            policy.concurrency
        ),
        (
            Duration::from_secs(60),
            Duration::from_secs(600),
            32 * 1024,
            4
        )
    );
    assert_eq!(policy.path, "/usr/local/bin:/usr/bin:/bin");
    assert_eq!(policy.file_max, 16 * 1024 * 1024);
    let on = "[security.exec]\nenabled = true\ntimeout = \"5s\"\ntimeout_max = \"1m\"\n\
              output_max = 4096\nconcurrency = 2\npath = \"/opt/bin:/bin\"\n\
              file_max = 1024\n";
    match parse("agentd.toml", on, &env) {
        Ok(c) if cfg!(feature = "exec") => {
            let exec = c.exec.unwrap();
            assert_eq!(
                (
                    exec.timeout,
                    exec.timeout_max,
                    exec.output_max,
                    exec.concurrency
                ),
                (Duration::from_secs(5), Duration::from_secs(60), 4096, 2)
            );
            assert_eq!(exec.path, "/opt/bin:/bin");
            assert_eq!(exec.file_max, 1024);
        }
        Err(e) if !cfg!(feature = "exec") => {
            assert_eq!((e.key.as_str(), e.line), ("security.exec.enabled", 2));
            assert!(e.message.contains("without the exec feature"), "{e}");
            assert!(e.message.contains("--features exec"), "{e}");
        }
        got => panic!("{got:?}"),
    }
}

#[test]
fn exec_policy_errors_are_named_even_when_disabled() {
    let key = |body: &str| err(&format!("[security.exec]\n{body}")).key;
    assert_eq!(key("timeout = \"11m\""), "security.exec.timeout");
    assert_eq!(
        key("timeout = \"2m\"\ntimeout_max = \"1m\""),
        "security.exec.timeout"
    );
    assert_eq!(key("timeout_max = \"soon\""), "security.exec.timeout_max");
    assert_eq!(key("output_max = 0"), "security.exec.output_max");
    let limit = security::OUTPUT_LIMIT;
    assert_eq!(
        key(&format!("output_max = {}", limit + 1)),
        "security.exec.output_max"
    );
    let at_limit = format!("[security.exec]\noutput_max = {limit}\ntimeout = \"10m\"\n");
    assert!(parse("agentd.toml", &at_limit, &env).is_ok());
    assert_eq!(key("file_max = 0"), "security.exec.file_max");
    let limit = security::FILE_LIMIT;
    assert_eq!(
        key(&format!("file_max = {}", limit + 1)),
        "security.exec.file_max"
    );
    let at_limit = format!("[security.exec]\nfile_max = {limit}\n");
    assert!(parse("agentd.toml", &at_limit, &env).is_ok());
    assert_eq!(key("concurrency = 0"), "security.exec.concurrency");
    let limit = security::CONCURRENCY_LIMIT;
    assert_eq!(
        key(&format!("concurrency = {}", limit + 1)),
        "security.exec.concurrency"
    );
    assert!(
        parse(
            "agentd.toml",
            &format!("[security.exec]\nconcurrency = {limit}\n"),
            &env
        )
        .is_ok()
    );
    for path in ["bin", "/bin:", "/bin:usr/bin", "", "/bin\\u0000"] {
        let body = format!("path = \"{path}\"");
        assert_eq!(key(&body), "security.exec.path", "{path:?}");
    }
    assert_eq!(key("shell = true"), "");
}

#[test]
fn contracts_are_implemented_by_a_family_server_or_a_mapping() {
    let servers = "[[mcp.servers]]\nname = \"kb\"\nurl = \"http://127.0.0.1:1/mcp\"\n\
                   [[mcp.servers]]\nname = \"box\"\nurl = \"http://127.0.0.1:2/mcp\"\n";
    let text = format!(
        "{servers}[knowledge]\nserver = \"kb\"\n\
         [contracts.map.\"knowledge.get\"]\nserver = \"box\"\ntool = \"page\"\n\
         [contracts.map.\"code.run\"]\nserver = \"box\"\ntool = \"run\"\n"
    );
    let c = parse("agentd.toml", &text, &env).unwrap();
    let mapped = |tool: &str| match c.contracts.implementation(tool) {
        Ok(Implementation::Mapped(m)) => (m.server.clone(), m.tool.clone()),
        other => panic!("{tool}: {other:?}"),
    };
    let pair = |s: &str, t: &str| (s.to_owned(), t.to_owned());
    assert_eq!(mapped("knowledge.search"), pair("kb", "knowledge.search"));
    assert_eq!(mapped("knowledge.list"), pair("kb", "knowledge.list"));
    assert_eq!(
        mapped("knowledge.get"),
        pair("box", "page"),
        "a mapping wins"
    );
    assert_eq!(mapped("code.run"), pair("box", "run"));

    // Nothing implements the rest: each says why.
    let why = |tool: &str| c.contracts.implementation(tool).unwrap_err();
    assert!(
        why("search.query").contains("no search.server"),
        "{}",
        why("search.query")
    );
    assert!(
        why("exec").contains("security.exec.enabled"),
        "{}",
        why("exec")
    );
    let bare = parse("agentd.toml", servers, &env).unwrap();
    let code = bare.contracts.implementation("code.run").unwrap_err();
    assert!(code.contains("only a mapping"), "{code}");
    let mut local = bare.contracts.clone();
    local.local_exec = true;
    assert_eq!(local.implementation("exec"), Ok(Implementation::Local));

    // An unknown server, a tool that is no contract's, an empty tool: refused at load.
    let e = err(&format!("{servers}[search]\nserver = \"web\"\n"));
    assert_eq!(e.key, "search.server");
    assert!(e.message.contains("not one of mcp.servers"), "{e}");
    let e = err(&text.replace("\"code.run\"", "\"memory.get\""));
    assert_eq!(e.key, "contracts.map.\"memory.get\"");
    assert!(e.message.contains("no contract tool"), "{e}");
    let e = err(&text.replace(
        "server = \"box\"\ntool = \"run\"",
        "server = \"nope\"\ntool = \"run\"",
    ));
    assert_eq!(e.key, "contracts.map.\"code.run\".server");
    let e = err(&text.replace("tool = \"run\"", "tool = \"\""));
    assert_eq!(e.key, "contracts.map.\"code.run\".tool");
    let e = err(&format!("{servers}[knowledge]\nservers = \"kb\"\n"));
    // An unknown field is named by its line, as every unknown field is.
    assert_eq!((e.key.as_str(), e.line), ("", 8), "{e}");
    assert!(e.message.contains("unknown field `servers`"), "{e}");

    // exec mapped while the local runner is enabled: refused, both keys named.
    let both = format!(
        "{servers}[contracts.map.exec]\nserver = \"box\"\ntool = \"run\"\n\
         [security.exec]\nenabled = true\n"
    );
    let e = err(&both);
    match cfg!(feature = "exec") {
        true => {
            assert_eq!(e.key, "contracts.map.\"exec\"");
            assert!(e.message.contains("security.exec.enabled"), "{e}");
        }
        false => assert_eq!(e.key, "security.exec.enabled"),
    }
    let mapped = parse("agentd.toml", &both.replace("true", "false"), &env).unwrap();
    let exec = mapped.contracts.implementation("exec").unwrap();
    assert!(matches!(exec, Implementation::Mapped(_)));
}

/// `limits.run_concurrency` is 1 to 4096: the bound taken, one past it refused naming the key;
/// `limits.run_retention` is a duration of 1 h to 30 days; the key's former name is not taken.
#[test]
fn the_run_concurrency_bound_is_checked() {
    let limits = |body: &str| parse("agentd.toml", &format!("[limits]\n{body}\n"), &env);
    let c = limits("run_concurrency = 4096\nrun_retention = \"1d\"").unwrap();
    assert_eq!(c.run_concurrency, 4096);
    assert_eq!(c.run_retention, Duration::from_secs(24 * 3600));
    assert_eq!(limits("run_concurrency = 1").unwrap().run_concurrency, 1);
    for past in ["run_concurrency = 4097", "run_concurrency = 0"] {
        let e = limits(past).unwrap_err();
        assert_eq!(e.key, "limits.run_concurrency", "{e}");
        assert!(e.message.contains("1 to 4096"), "{e}");
    }
    let at_bound = limits("run_retention = \"30d\"").unwrap();
    assert_eq!(at_bound.run_retention, Duration::from_secs(30 * 24 * 3600));
    let e = limits("run_retention = \"31d\"").unwrap_err();
    assert_eq!(e.key, "limits.run_retention", "{e}");
    let floor = limits("run_retention = \"3600s\"").unwrap();
    assert_eq!(floor.run_retention, Duration::from_secs(3600));
    let e = limits("run_retention = \"3599s\"").unwrap_err();
    assert_eq!(e.key, "limits.run_retention", "{e}");
    assert!(e.message.contains("at least 1h"), "{e}");
    assert!(limits("workflow_runs = 1").is_err());
}
