//! Integration tests of the MCP types: revisions, error kinds, capabilities, values that
//! must survive a decode and encode unchanged, `server/discover` defaults, `resultType`,
//! `tools/call` outcomes, pagination, the `_meta` keys, and `log_text`.

use mcp_wire::events::EventsError;
use mcp_wire::{
    CacheScope, CallToolParams, CallToolResult, ClientCapabilities, ContentBlock, DiscoverResult,
    EmptyResult, Era, Error, ErrorKind, ErrorObject, Implementation, InitializeParams,
    InitializeResult, LOG_TEXT_MAX, ListToolsResult, Message, Meta, ModernMeta, Outcome,
    ResultType, Revision, ServerCapabilities, Tool, code, decode, encode_result, log_text,
};
use serde_json::{Map, Value, json};

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Revision.
// ---------------------------------------------------------------------------------------------

const REVISIONS: [(Revision, &str, Era); 5] = [
    (Revision::V2024_11_05, "2024-11-05", Era::Legacy),
    (Revision::V2025_03_26, "2025-03-26", Era::Legacy),
    (Revision::V2025_06_18, "2025-06-18", Era::Legacy),
    (Revision::V2025_11_25, "2025-11-25", Era::Legacy),
    (Revision::V2026_07_28, "2026-07-28", Era::Modern),
];

#[test]
fn revision_parses_and_prints_every_known_revision() {
    for (revision, text, _) in REVISIONS {
        assert_eq!(text.parse::<Revision>().unwrap(), revision);
        assert_eq!(revision.as_str(), text);
        assert_eq!(revision.to_string(), text);
        assert_eq!(
            serde_json::to_string(&revision).unwrap(),
            format!("\"{text}\"")
        );
        assert_eq!(
            serde_json::from_str::<Revision>(&format!("\"{text}\"")).unwrap(),
            revision
        );
    }
    assert_eq!(
        Revision::ALL.to_vec(),
        REVISIONS.iter().map(|r| r.0).collect::<Vec<_>>()
    );
    assert_eq!(Revision::LATEST, Revision::V2026_07_28);
    assert_eq!(Revision::LATEST_LEGACY, Revision::V2025_11_25);
}

#[test]
fn revision_refuses_unknown_strings() {
    for text in [
        "",
        "2026-07-29",
        "2025-11-5",
        " 2025-11-25",
        "2025-11-25 ",
        "draft",
        "1900-01-01",
        "2024/11/05",
    ] {
        assert_eq!(
            text.parse::<Revision>(),
            Err(Error::UnknownRevision(text.to_owned())),
            "{text:?}"
        );
        assert!(
            serde_json::from_value::<Revision>(json!(text)).is_err(),
            "{text:?}"
        );
    }
    assert!(serde_json::from_value::<Revision>(json!(20251125)).is_err());
}

#[test]
fn revisions_are_ordered_oldest_first() {
    for pair in REVISIONS.windows(2) {
        assert!(pair[0].0 < pair[1].0, "{:?} < {:?}", pair[0].0, pair[1].0);
        // The order is the order of the date strings.
        assert!(pair[0].1 < pair[1].1);
    }
    assert_eq!(Revision::ALL.iter().max(), Some(&Revision::LATEST));
    assert_eq!(Revision::ALL.iter().min(), Some(&Revision::V2024_11_05));
}

#[test]
fn revision_newest_known() {
    let cases: [(&[&str], Option<Revision>); 8] = [
        (&[], None),
        (&["1999-01-01", "draft", ""], None),
        (&["2024-11-05"], Some(Revision::V2024_11_05)),
        (
            &["1999-01-01", "2025-03-26", "2024-11-05"],
            Some(Revision::V2025_03_26),
        ),
        (&["2026-07-28", "2025-11-25"], Some(Revision::V2026_07_28)),
        (
            &["2025-11-25", "2026-07-28", "2099-01-01"],
            Some(Revision::V2026_07_28),
        ),
        (&["2025-06-18", "2025-06-18"], Some(Revision::V2025_06_18)),
        (&["2027-01-01", "2025-11-25"], Some(Revision::V2025_11_25)),
    ];
    for (versions, want) in cases {
        assert_eq!(Revision::newest_known(versions), want, "{versions:?}");
        let owned: Vec<String> = versions.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(Revision::newest_known(&owned), want, "{versions:?}");
    }
}

#[test]
fn revision_eras() {
    for (revision, _, era) in REVISIONS {
        assert_eq!(revision.era(), era, "{revision}");
    }
    assert_eq!(Era::Legacy.to_string(), "legacy");
    assert_eq!(Era::Modern.to_string(), "modern");
}

// ---------------------------------------------------------------------------------------------
// ErrorObject::kind.
// ---------------------------------------------------------------------------------------------

#[test]
fn error_kind_of_every_code_without_data() {
    let cases: Vec<(i64, ErrorKind)> = vec![
        (code::PARSE_ERROR, ErrorKind::ParseError),
        (code::INVALID_REQUEST, ErrorKind::InvalidRequest),
        (code::METHOD_NOT_FOUND, ErrorKind::MethodNotFound),
        (code::INVALID_PARAMS, ErrorKind::InvalidParams),
        (code::INTERNAL_ERROR, ErrorKind::InternalError),
        (
            code::RESOURCE_NOT_FOUND,
            ErrorKind::ResourceNotFound { uri: None },
        ),
        (
            code::URL_ELICITATION_REQUIRED,
            ErrorKind::UrlElicitationRequired {
                elicitations: vec![],
            },
        ),
        (code::HEADER_MISMATCH, ErrorKind::HeaderMismatch),
        (
            code::MISSING_REQUIRED_CLIENT_CAPABILITY,
            ErrorKind::MissingClientCapability {
                required: ClientCapabilities::none(),
            },
        ),
        (
            code::UNSUPPORTED_PROTOCOL_VERSION,
            ErrorKind::UnsupportedVersion {
                supported: vec![],
                requested: None,
            },
        ),
        (
            code::EVENTS_NOT_FOUND,
            ErrorKind::Events(EventsError::NotFound { kind: None }),
        ),
        (
            code::EVENTS_FORBIDDEN,
            ErrorKind::Events(EventsError::Forbidden),
        ),
        (
            code::EVENTS_RESOURCE_EXHAUSTED,
            ErrorKind::Events(EventsError::ResourceExhausted {
                limit: None,
                max: None,
            }),
        ),
        (
            code::EVENTS_UNSUPPORTED,
            ErrorKind::Events(EventsError::Unsupported {
                feature: None,
                value: None,
                reason: None,
            }),
        ),
        (
            code::EVENTS_CALLBACK_ENDPOINT,
            ErrorKind::Events(EventsError::CallbackEndpoint { reason: None }),
        ),
        (-32000, ErrorKind::Other),
        (-32001, ErrorKind::Other),
        (-32028, ErrorKind::Other),
        (0, ErrorKind::Other),
        (42, ErrorKind::Other),
    ];
    for (c, want) in cases {
        assert_eq!(ErrorObject::new(c, "m").kind(), want, "{c}");
        // Data of the wrong shape reads like no data.
        assert_eq!(
            ErrorObject::new(c, "m").with_data(json!("text")).kind(),
            want,
            "{c} with string data"
        );
        assert_eq!(
            ErrorObject::new(c, "m").with_data(json!({})).kind(),
            want,
            "{c} with empty data"
        );
    }
}

#[test]
fn error_codes_have_the_spec_values() {
    let cases = [
        (code::PARSE_ERROR, -32700),
        (code::INVALID_REQUEST, -32600),
        (code::METHOD_NOT_FOUND, -32601),
        (code::INVALID_PARAMS, -32602),
        (code::INTERNAL_ERROR, -32603),
        (code::RESOURCE_NOT_FOUND, -32002),
        (code::URL_ELICITATION_REQUIRED, -32042),
        (code::HEADER_MISMATCH, -32020),
        (code::MISSING_REQUIRED_CLIENT_CAPABILITY, -32021),
        (code::UNSUPPORTED_PROTOCOL_VERSION, -32022),
        (code::EVENTS_NOT_FOUND, -32023),
        (code::EVENTS_FORBIDDEN, -32024),
        (code::EVENTS_RESOURCE_EXHAUSTED, -32025),
        (code::EVENTS_UNSUPPORTED, -32026),
        (code::EVENTS_CALLBACK_ENDPOINT, -32027),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
    }
}

#[test]
fn error_kind_of_every_code_with_data() {
    let cases: Vec<(i64, Value, ErrorKind)> = vec![
        (code::PARSE_ERROR, json!({"x":1}), ErrorKind::ParseError),
        (
            code::INVALID_REQUEST,
            json!({"x":1}),
            ErrorKind::InvalidRequest,
        ),
        (
            code::METHOD_NOT_FOUND,
            json!({"method":"m"}),
            ErrorKind::MethodNotFound,
        ),
        (
            code::INVALID_PARAMS,
            json!({"uri":"file:///a"}),
            ErrorKind::InvalidParams,
        ),
        (code::INTERNAL_ERROR, json!([1]), ErrorKind::InternalError),
        (
            code::RESOURCE_NOT_FOUND,
            json!({"uri":"file:///missing"}),
            ErrorKind::ResourceNotFound {
                uri: Some("file:///missing".into()),
            },
        ),
        (
            code::URL_ELICITATION_REQUIRED,
            json!({"elicitations":[{"mode":"url","url":"https://x","elicitationId":"e"}]}),
            ErrorKind::UrlElicitationRequired {
                elicitations: vec![json!({"mode":"url","url":"https://x","elicitationId":"e"})],
            },
        ),
        (
            code::HEADER_MISMATCH,
            json!({"header":"Mcp-Name"}),
            ErrorKind::HeaderMismatch,
        ),
        (
            code::MISSING_REQUIRED_CLIENT_CAPABILITY,
            json!({"requiredCapabilities":{"elicitation":{"form":{}}}}),
            ErrorKind::MissingClientCapability {
                required: ClientCapabilities::none().with_elicitation(),
            },
        ),
        (
            code::UNSUPPORTED_PROTOCOL_VERSION,
            json!({"supported":["2026-07-28","2025-11-25",7,"future"],"requested":"1900-01-01"}),
            ErrorKind::UnsupportedVersion {
                supported: vec!["2026-07-28".into(), "2025-11-25".into(), "future".into()],
                requested: Some("1900-01-01".into()),
            },
        ),
        (
            code::EVENTS_NOT_FOUND,
            json!({"kind":"subscription"}),
            ErrorKind::Events(EventsError::NotFound {
                kind: Some("subscription".into()),
            }),
        ),
        (
            code::EVENTS_FORBIDDEN,
            json!({"reason":"x"}),
            ErrorKind::Events(EventsError::Forbidden),
        ),
        (
            code::EVENTS_RESOURCE_EXHAUSTED,
            json!({"limit":"subscriptions","max":10}),
            ErrorKind::Events(EventsError::ResourceExhausted {
                limit: Some("subscriptions".into()),
                max: Some(10),
            }),
        ),
        (
            code::EVENTS_UNSUPPORTED,
            json!({"feature":"deliveryMode","value":"webhook","reason":"schema_changed"}),
            ErrorKind::Events(EventsError::Unsupported {
                feature: Some("deliveryMode".into()),
                value: Some("webhook".into()),
                reason: Some("schema_changed".into()),
            }),
        ),
        (
            code::EVENTS_CALLBACK_ENDPOINT,
            json!({"reason":"timeout"}),
            ErrorKind::Events(EventsError::CallbackEndpoint {
                reason: Some("timeout".into()),
            }),
        ),
        (-32000, json!({"anything":true}), ErrorKind::Other),
    ];
    for (c, data, want) in cases {
        let e = ErrorObject::new(c, "m").with_data(data.clone());
        assert_eq!(e.kind(), want, "{c} {data}");
        // And the same after a trip through JSON.
        let e: ErrorObject =
            serde_json::from_value(json!({"code": c, "message": "m", "data": data})).unwrap();
        assert_eq!(e.kind(), want, "{c} decoded");
    }
}

#[test]
fn events_error_from_code_only_for_events_codes() {
    for c in [-32022, -32028, -32603, 0] {
        assert_eq!(EventsError::from_code(c, None), None, "{c}");
    }
    assert_eq!(
        EventsError::from_code(-32024, Some(&json!({}))),
        Some(EventsError::Forbidden)
    );
    // `max` must be a non-negative integer.
    assert_eq!(
        EventsError::from_code(-32025, Some(&json!({"max":-1,"limit":5}))),
        Some(EventsError::ResourceExhausted {
            limit: None,
            max: None
        })
    );
}

// ---------------------------------------------------------------------------------------------
// Capabilities.
// ---------------------------------------------------------------------------------------------

fn server_caps(v: Value) -> ServerCapabilities {
    serde_json::from_value(v).unwrap()
}

#[test]
fn server_capabilities_flags() {
    // (caps, tools, tools_list_changed, resources, subscribe, resources_list_changed,
    //  prompts, prompts_list_changed, completions, logging)
    type Row = (Value, [bool; 9]);
    let rows: Vec<Row> = vec![
        (json!({}), [false; 9]),
        (
            json!({"tools":{}}),
            [true, false, false, false, false, false, false, false, false],
        ),
        (
            json!({"tools":{"listChanged":true}}),
            [true, true, false, false, false, false, false, false, false],
        ),
        (
            json!({"tools":{"listChanged":false}}),
            [true, false, false, false, false, false, false, false, false],
        ),
        (
            json!({"tools":{"listChanged":"yes"}}),
            [true, false, false, false, false, false, false, false, false],
        ),
        (
            json!({"resources":{"subscribe":true}}),
            [false, false, true, true, false, false, false, false, false],
        ),
        (
            json!({"resources":{"listChanged":true}}),
            [false, false, true, false, true, false, false, false, false],
        ),
        (
            json!({"prompts":{"listChanged":true}}),
            [false, false, false, false, false, true, true, false, false],
        ),
        (
            json!({"prompts":{}}),
            [false, false, false, false, false, true, false, false, false],
        ),
        (
            json!({"completions":{},"logging":{}}),
            [false, false, false, false, false, false, false, true, true],
        ),
        (
            json!({"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},
                   "prompts":{"listChanged":true},"completions":{},"logging":{}}),
            [true; 9],
        ),
    ];
    for (v, want) in rows {
        let c = server_caps(v.clone());
        let got = [
            c.tools(),
            c.tools_list_changed(),
            c.resources(),
            c.resources_subscribe(),
            c.resources_list_changed(),
            c.prompts(),
            c.prompts_list_changed(),
            c.completions(),
            c.logging(),
        ];
        assert_eq!(got, want, "{v}");
    }
}

#[test]
fn server_capabilities_events_from_extension_and_from_top_level() {
    let ext =
        server_caps(json!({"extensions":{"io.modelcontextprotocol/events":{"modes":["poll"]}}}));
    assert_eq!(ext.events(), Some(&json!({"modes":["poll"]})));
    assert_eq!(
        ext.extension("io.modelcontextprotocol/events"),
        Some(&json!({"modes":["poll"]}))
    );

    let top = server_caps(json!({"events":{"push":true}}));
    assert_eq!(top.events(), Some(&json!({"push":true})));
    assert_eq!(top.extension("io.modelcontextprotocol/events"), None);

    // The extension wins when both are there.
    let both = server_caps(json!({"events":{"old":1},
        "extensions":{"io.modelcontextprotocol/events":{"new":1}}}));
    assert_eq!(both.events(), Some(&json!({"new":1})));

    for none in [
        json!({}),
        json!({"extensions":{}}),
        json!({"extensions":{"io.modelcontextprotocol/other":{}}}),
        json!({"experimental":{"events":{}}}),
    ] {
        assert_eq!(server_caps(none.clone()).events(), None, "{none}");
    }
    assert_eq!(
        mcp_wire::events::EXTENSION,
        "io.modelcontextprotocol/events"
    );
}

#[test]
fn client_capabilities_none_and_elicitation() {
    assert_eq!(
        serde_json::to_string(&ClientCapabilities::none()).unwrap(),
        "{}"
    );
    assert!(ClientCapabilities::none().as_map().is_empty());
    assert!(!ClientCapabilities::none().elicitation_form());
    assert!(!ClientCapabilities::none().elicitation_url());

    let caps = ClientCapabilities::none().with_elicitation();
    assert_eq!(
        serde_json::to_string(&caps).unwrap(),
        r#"{"elicitation":{"form":{}}}"#
    );
    assert!(caps.elicitation_form());
    assert!(!caps.elicitation_url());

    let cases = [
        (json!({"elicitation":{}}), true, false),
        (json!({"elicitation":{"form":{}}}), true, false),
        (json!({"elicitation":{"url":{}}}), false, true),
        (json!({"elicitation":{"form":{},"url":{}}}), true, true),
        (json!({"elicitation":true}), false, false),
        (json!({"sampling":{}}), false, false),
    ];
    for (v, form, url) in cases {
        let c: ClientCapabilities = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(c.elicitation_form(), form, "{v}");
        assert_eq!(c.elicitation_url(), url, "{v}");
    }
}

#[test]
fn client_capabilities_extensions() {
    let settings = object(json!({"a":1}));
    let caps = ClientCapabilities::none()
        .with_extension("io.example/one", settings.clone())
        .with_extension("io.example/two", Map::new())
        .with_elicitation();
    assert_eq!(caps.extension("io.example/one"), Some(&json!({"a":1})));
    assert_eq!(caps.extension("io.example/two"), Some(&json!({})));
    assert_eq!(caps.extension("io.example/three"), None);
    assert_eq!(
        serde_json::to_value(&caps).unwrap(),
        json!({"elicitation":{"form":{}},
               "extensions":{"io.example/one":{"a":1},"io.example/two":{}}})
    );
    let decoded: ClientCapabilities =
        serde_json::from_value(json!({"extensions":{"io.x/y":{"k":"v"}}})).unwrap();
    assert_eq!(decoded.extension("io.x/y"), Some(&json!({"k":"v"})));
}

// ---------------------------------------------------------------------------------------------
// Values peers extend survive a decode and an encode.
// ---------------------------------------------------------------------------------------------

#[test]
fn capabilities_with_unknown_keys_survive() {
    let server = json!({
        "tools":{"listChanged":true,"x-vendor":[1,2,{"deep":null}]},
        "experimental":{"anything":{"goes":true}},
        "extensions":{"io.example/ext":{"setting":1.5}},
        "futureCapability":{"k":"v"},
        "weird":null
    });
    let caps: ServerCapabilities = serde_json::from_value(server.clone()).unwrap();
    assert_eq!(serde_json::to_value(&caps).unwrap(), server);
    let text = serde_json::to_string(&server).unwrap();
    let caps: ServerCapabilities = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_value(&caps).unwrap(), server);

    let client = json!({
        "elicitation":{"form":{},"url":{},"x-mode":{}},
        "roots":{},
        "sampling":{"context":{},"tools":{}},
        "extensions":{"io.example/ext":{}},
        "futureCapability":[1]
    });
    let caps: ClientCapabilities = serde_json::from_value(client.clone()).unwrap();
    assert_eq!(serde_json::to_value(&caps).unwrap(), client);
}

#[test]
fn initialize_and_discover_keep_capabilities_and_meta_whole() {
    let init_result = json!({
        "protocolVersion":"2025-11-25",
        "capabilities":{"tools":{"x-extra":true},"vendor":{"a":[1]}},
        "serverInfo":{"name":"s","version":"1"},
        "instructions":"be nice",
        "_meta":{"io.example/k":{"nested":[null,true]},"other":1}
    });
    let r: InitializeResult = serde_json::from_value(init_result.clone()).unwrap();
    assert_eq!(serde_json::to_value(&r).unwrap(), init_result);
    assert_eq!(r.revision(), Ok(Revision::V2025_11_25));

    let init_params = json!({
        "protocolVersion":"2026-01-01",
        "capabilities":{"elicitation":{},"x-client":{"k":1}},
        "clientInfo":{"name":"my-client","version":"0.1.0"},
        "_meta":{"progressToken":5,"x":{"y":"z"}}
    });
    let p: InitializeParams = serde_json::from_value(init_params.clone()).unwrap();
    assert_eq!(serde_json::to_value(&p).unwrap(), init_params);

    let discover = json!({
        "resultType":"complete",
        "supportedVersions":["2026-07-28","2099-01-01"],
        "capabilities":{"extensions":{"io.modelcontextprotocol/events":{}},"x":{}},
        "ttlMs":1000,
        "cacheScope":"public",
        "_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"},"vendor/k":[1]}
    });
    let d: DiscoverResult = serde_json::from_value(discover.clone()).unwrap();
    assert_eq!(serde_json::to_value(&d).unwrap(), discover);
}

#[test]
fn meta_with_unknown_keys_survives_a_call() {
    let params = json!({
        "name":"add",
        "arguments":{"a":1,"nested":{"b":[true,null]}},
        "_meta":{"agent/run_id":"r","io.example/x":{"deep":{"deeper":[1,"two"]}},"progressToken":"p"}
    });
    let p: CallToolParams = serde_json::from_value(params.clone()).unwrap();
    assert_eq!(serde_json::to_value(&p).unwrap(), params);
}

#[test]
fn tool_schemas_are_kept_as_exact_text() {
    let input_schema = r#"{ "type" : "object", "x-vendor": {"keep": [1, 2.50, "me"]},
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        "$defs": {"unused": {"type":"null"}} }"#;
    let output_schema = r#"{"type":"object","additionalProperties":false,"x-o":1e2}"#;
    let execution = r#"{"taskSupport":"optional","x-future":{}}"#;
    let tool_text = format!(
        r#"{{"name":"t","inputSchema":{input_schema},"outputSchema":{output_schema},"execution":{execution}}}"#
    );
    let tool: Tool = serde_json::from_str(&tool_text).unwrap();
    assert_eq!(tool.input_schema.get(), input_schema);
    assert_eq!(tool.output_schema.as_ref().unwrap().get(), output_schema);
    assert_eq!(tool.execution.as_ref().unwrap().get(), execution);
    assert_eq!(serde_json::to_string(&tool).unwrap(), tool_text);

    // Through a whole tools/list response: decode, type, encode.
    let response = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"tools":[{tool_text}]}}}}"#);
    let Message::Response(r) = decode(response.as_bytes(), 1 << 20).unwrap() else {
        panic!("not a response")
    };
    let page: ListToolsResult = r.result_as().unwrap().unwrap();
    assert_eq!(page.items[0].input_schema.get(), input_schema);
    let mut out = Vec::new();
    encode_result(&mut out, &mcp_wire::RequestId::Number(1), &page).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), response);
}

// ---------------------------------------------------------------------------------------------
// DiscoverResult.
// ---------------------------------------------------------------------------------------------

fn discover(extra: Value) -> DiscoverResult {
    let mut v = object(json!({"supportedVersions":["2026-07-28"],"capabilities":{}}));
    v.extend(object(extra));
    serde_json::from_value(Value::Object(v)).unwrap()
}

#[test]
fn discover_result_defaults() {
    let d = discover(json!({}));
    assert_eq!(d.result_type(), ResultType::Complete);
    assert_eq!(d.ttl_ms(), 0);
    assert_eq!(d.cache_scope(), CacheScope::Private);
    assert_eq!(d.server_info(), None);
    assert_eq!(d.newest_known(), Some(Revision::V2026_07_28));
    assert_eq!(d.supported_versions, ["2026-07-28"]);

    let cases: Vec<(Value, ResultType, u64, CacheScope)> = vec![
        (
            json!({"ttlMs":-1}),
            ResultType::Complete,
            0,
            CacheScope::Private,
        ),
        (
            json!({"ttlMs":-99999}),
            ResultType::Complete,
            0,
            CacheScope::Private,
        ),
        (
            json!({"ttlMs":0}),
            ResultType::Complete,
            0,
            CacheScope::Private,
        ),
        (
            json!({"ttlMs":60000}),
            ResultType::Complete,
            60000,
            CacheScope::Private,
        ),
        (
            json!({"cacheScope":"public"}),
            ResultType::Complete,
            0,
            CacheScope::Public,
        ),
        (
            json!({"cacheScope":"private"}),
            ResultType::Complete,
            0,
            CacheScope::Private,
        ),
        (
            json!({"cacheScope":"shared"}),
            ResultType::Complete,
            0,
            CacheScope::Private,
        ),
        (
            json!({"cacheScope":"PUBLIC"}),
            ResultType::Complete,
            0,
            CacheScope::Private,
        ),
        (
            json!({"cacheScope":""}),
            ResultType::Complete,
            0,
            CacheScope::Private,
        ),
        (
            json!({"resultType":"complete"}),
            ResultType::Complete,
            0,
            CacheScope::Private,
        ),
        (
            json!({"resultType":"input_required","ttlMs":5,"cacheScope":"public"}),
            ResultType::InputRequired,
            5,
            CacheScope::Public,
        ),
    ];
    for (extra, rt, ttl, scope) in cases {
        let d = discover(extra.clone());
        assert_eq!(d.result_type(), rt, "{extra}");
        assert_eq!(d.ttl_ms(), ttl, "{extra}");
        assert_eq!(d.cache_scope(), scope, "{extra}");
    }
}

#[test]
fn discover_result_ignores_instructions_and_reads_server_info() {
    let d = discover(json!({
        "instructions":"ignored",
        "_meta":{"io.modelcontextprotocol/serverInfo":{"name":"srv","version":"2.0","title":"T"}}
    }));
    let info = d.server_info().unwrap();
    assert_eq!(info.name, "srv");
    assert_eq!(info.version, "2.0");
    assert_eq!(info.title.as_deref(), Some("T"));
    // `instructions` is not kept.
    assert!(
        serde_json::to_value(&d)
            .unwrap()
            .get("instructions")
            .is_none()
    );

    // A malformed serverInfo reads as none.
    let d = discover(json!({"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"x"}}}));
    assert_eq!(d.server_info(), None);
    let d = discover(json!({"_meta":{}}));
    assert_eq!(d.server_info(), None);
    // No top-level serverInfo in the final schema.
    let d = discover(json!({"serverInfo":{"name":"s","version":"1"}}));
    assert_eq!(d.server_info(), None);
}

#[test]
fn discover_result_new_and_newest_known() {
    let d = DiscoverResult::new(
        &[Revision::V2025_11_25, Revision::V2026_07_28],
        ServerCapabilities::default(),
    );
    assert_eq!(
        serde_json::to_value(&d).unwrap(),
        json!({"resultType":"complete","supportedVersions":["2025-11-25","2026-07-28"],
               "capabilities":{},"ttlMs":0,"cacheScope":"private"})
    );
    let d = discover(json!({"supportedVersions":["2099-01-01","2025-06-18","x"]}));
    assert_eq!(d.newest_known(), Some(Revision::V2025_06_18));
    let d = discover(json!({"supportedVersions":[]}));
    assert_eq!(d.newest_known(), None);
}

// ---------------------------------------------------------------------------------------------
// ResultType and tools/call outcomes.
// ---------------------------------------------------------------------------------------------

#[test]
fn result_type_refuses_unknown_values() {
    assert_eq!(
        serde_json::from_value::<ResultType>(json!("complete")).unwrap(),
        ResultType::Complete
    );
    assert_eq!(
        serde_json::from_value::<ResultType>(json!("input_required")).unwrap(),
        ResultType::InputRequired
    );
    for bad in [
        json!("task"),
        json!("Complete"),
        json!("inputRequired"),
        json!(""),
        json!(1),
        json!(null),
    ] {
        assert!(
            serde_json::from_value::<ResultType>(bad.clone()).is_err(),
            "{bad}"
        );
    }
    assert_eq!(ResultType::default(), ResultType::Complete);
    assert_eq!(
        serde_json::to_string(&ResultType::InputRequired).unwrap(),
        r#""input_required""#
    );
}

fn call_outcome(result: &str) -> Result<Outcome<CallToolResult>, Error> {
    let text = format!(r#"{{"jsonrpc":"2.0","id":2,"result":{result}}}"#);
    let Message::Response(r) = decode(text.as_bytes(), 1 << 20)? else {
        panic!("not a response")
    };
    r.result_as::<Outcome<CallToolResult>>()
        .map(|o| o.expect("not an error response"))
}

#[test]
fn call_tool_outcome_with_result_type_task_fails() {
    for result in [
        r#"{"resultType":"task","task":{"taskId":"t"}}"#,
        r#"{"resultType":"task","content":[]}"#,
        r#"{"resultType":"TASK","content":[]}"#,
    ] {
        let got = call_outcome(result);
        assert!(matches!(got, Err(Error::Shape { .. })), "{result}: {got:?}");
    }
    // Other results refuse it too.
    assert!(serde_json::from_value::<EmptyResult>(json!({"resultType":"task"})).is_err());
    assert!(
        serde_json::from_value::<DiscoverResult>(json!({"resultType":"task",
            "supportedVersions":[],"capabilities":{}}))
        .is_err()
    );
}

#[test]
fn call_tool_outcome_complete() {
    let cases = [
        (
            r#"{"content":[{"type":"text","text":"5"}],"isError":false}"#,
            None,
            Some(false),
        ),
        (
            r#"{"resultType":"complete","content":[{"type":"text","text":"5"}]}"#,
            Some(ResultType::Complete),
            None,
        ),
        (
            r#"{"content":[{"type":"text","text":"5"}],"isError":true}"#,
            None,
            Some(true),
        ),
    ];
    for (result, rt, is_error) in cases {
        let Outcome::Complete(r) = call_outcome(result).unwrap() else {
            panic!("{result}: not complete")
        };
        assert_eq!(r.result_type, rt, "{result}");
        assert_eq!(r.is_error, is_error, "{result}");
        assert_eq!(r.is_error(), is_error.unwrap_or(false), "{result}");
        assert_eq!(r.content, vec![ContentBlock::text("5")], "{result}");
    }

    let Outcome::Complete(r) =
        call_outcome(r#"{"content":[],"structuredContent":{"temp":21},"_meta":{"k":"v"}}"#)
            .unwrap()
    else {
        panic!("not complete")
    };
    assert!(r.content.is_empty());
    assert_eq!(r.structured_content, Some(json!({"temp":21})));
    assert_eq!(r.meta, Some(object(json!({"k":"v"}))));
}

#[test]
fn call_tool_outcome_input_required() {
    let Outcome::InputRequired(i) = call_outcome(
        r#"{"resultType":"input_required",
            "inputRequests":{"login":{"method":"elicitation/create",
              "params":{"message":"Your login?","requestedSchema":{"type":"object"}}}},
            "requestState":"opaque==","_meta":{"m":1}}"#,
    )
    .unwrap() else {
        panic!("not input_required")
    };
    assert_eq!(i.request_state.as_deref(), Some("opaque=="));
    assert_eq!(i.meta, Some(object(json!({"m":1}))));
    let ask = i.input_requests.as_ref().unwrap()["login"]
        .elicitation()
        .unwrap()
        .unwrap();
    assert_eq!(ask.message, "Your login?");
    assert_eq!(
        serde_json::to_value(Outcome::<CallToolResult>::InputRequired(i)).unwrap(),
        json!({"resultType":"input_required",
               "inputRequests":{"login":{"method":"elicitation/create",
                 "params":{"message":"Your login?","requestedSchema":{"type":"object"}}}},
               "requestState":"opaque==","_meta":{"m":1}})
    );

    // `content` is not needed on an interim result.
    assert!(matches!(
        call_outcome(r#"{"resultType":"input_required"}"#),
        Ok(Outcome::InputRequired(_))
    ));
}

#[test]
fn complete_call_tool_result_without_content_fails() {
    for result in [
        "{}",
        r#"{"isError":true}"#,
        r#"{"resultType":"complete"}"#,
        r#"{"structuredContent":{"a":1}}"#,
        r#"{"content":null}"#,
    ] {
        let got = call_outcome(result);
        assert!(matches!(got, Err(Error::Shape { .. })), "{result}: {got:?}");
    }
}

#[test]
fn call_tool_result_encodes_what_it_holds() {
    let r = CallToolResult::new(vec![ContentBlock::text("hi")]);
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        r#"{"content":[{"type":"text","text":"hi"}]}"#
    );
    assert!(!r.is_error());
}

// ---------------------------------------------------------------------------------------------
// Page.
// ---------------------------------------------------------------------------------------------

#[test]
fn page_next_cursor() {
    let cases = [
        (r#"{"tools":[],"nextCursor":""}"#, Some("")),
        (r#"{"tools":[],"nextCursor":"abc"}"#, Some("abc")),
        (r#"{"tools":[],"nextCursor":null}"#, None),
        (r#"{"tools":[]}"#, None),
    ];
    for (text, want) in cases {
        let page: ListToolsResult = serde_json::from_str(text).unwrap();
        assert_eq!(
            page.next_cursor.as_ref().map(|c| c.0.as_str()),
            want,
            "{text}"
        );
    }
}

#[test]
fn page_items_key_must_be_there_once() {
    for text in [
        r#"{}"#,
        r#"{"nextCursor":"x"}"#,
        r#"{"resources":[]}"#,
        r#"{"Tools":[]}"#,
        r#"{"tools":[],"tools":[]}"#,
        r#"{"tools":[{"name":"a","inputSchema":{}}],"nextCursor":"c","tools":[]}"#,
        r#"{"tools":null}"#,
        r#"{"tools":{}}"#,
    ] {
        assert!(
            serde_json::from_str::<ListToolsResult>(text).is_err(),
            "{text}"
        );
    }
}

#[test]
fn page_reads_the_cacheable_members() {
    let page: ListToolsResult = serde_json::from_str(
        r#"{"resultType":"complete","tools":[{"name":"a","inputSchema":{"type":"object"}}],
            "ttlMs":-5,"cacheScope":"public","_meta":{"k":1},"unknown":[1]}"#,
    )
    .unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].name, "a");
    assert_eq!(page.result_type, Some(ResultType::Complete));
    assert_eq!(page.ttl_ms, Some(-5));
    assert_eq!(page.ttl_ms(), 0);
    assert_eq!(page.cache_scope(), CacheScope::Public);
    assert_eq!(page.meta, Some(object(json!({"k":1}))));

    let page: ListToolsResult = serde_json::from_str(r#"{"tools":[],"ttlMs":250}"#).unwrap();
    assert_eq!(page.ttl_ms(), 250);
    assert_eq!(page.cache_scope(), CacheScope::Private);
    assert!(
        serde_json::from_str::<ListToolsResult>(r#"{"tools":[],"resultType":"task"}"#).is_err()
    );
}

// ---------------------------------------------------------------------------------------------
// _meta keys.
// ---------------------------------------------------------------------------------------------

fn keys(meta: &Meta) -> Vec<&str> {
    let mut k: Vec<&str> = meta.keys().map(String::as_str).collect();
    k.sort_unstable();
    k
}

#[test]
fn modern_meta_inserts_exactly_the_three_keys() {
    let info = Implementation::new("my-client", "0.1.0");
    let caps = ClientCapabilities::none().with_elicitation();
    let mut meta = Meta::new();
    ModernMeta {
        revision: Revision::V2026_07_28,
        client_info: &info,
        client_capabilities: &caps,
    }
    .insert_into(&mut meta);
    assert_eq!(
        keys(&meta),
        [
            "io.modelcontextprotocol/clientCapabilities",
            "io.modelcontextprotocol/clientInfo",
            "io.modelcontextprotocol/protocolVersion",
        ]
    );
    assert_eq!(
        Value::Object(meta),
        json!({
            "io.modelcontextprotocol/protocolVersion":"2026-07-28",
            "io.modelcontextprotocol/clientInfo":{"name":"my-client","version":"0.1.0"},
            "io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}
        })
    );

    // It replaces the three keys and keeps the others; no capabilities is `{}`.
    let mut meta = object(json!({
        "io.modelcontextprotocol/protocolVersion":"old",
        "progressToken":1
    }));
    ModernMeta {
        revision: Revision::V2025_11_25,
        client_info: &info,
        client_capabilities: &ClientCapabilities::none(),
    }
    .insert_into(&mut meta);
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2025-11-25"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({})
    );
    assert_eq!(meta["progressToken"], 1);
    assert_eq!(meta.len(), 4);
}

#[test]
fn meta_key_constants_match_the_spec() {
    use mcp_wire::meta::key;
    let cases = [
        (
            key::PROTOCOL_VERSION,
            "io.modelcontextprotocol/protocolVersion",
        ),
        (key::CLIENT_INFO, "io.modelcontextprotocol/clientInfo"),
        (
            key::CLIENT_CAPABILITIES,
            "io.modelcontextprotocol/clientCapabilities",
        ),
        (key::LOG_LEVEL, "io.modelcontextprotocol/logLevel"),
        (key::SERVER_INFO, "io.modelcontextprotocol/serverInfo"),
        (
            key::SUBSCRIPTION_ID,
            "io.modelcontextprotocol/subscriptionId",
        ),
        (key::PROGRESS_TOKEN, "progressToken"),
        (key::TRACEPARENT, "traceparent"),
        (key::TRACESTATE, "tracestate"),
        (key::BAGGAGE, "baggage"),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
    }
}

// ---------------------------------------------------------------------------------------------
// log_text.
// ---------------------------------------------------------------------------------------------

#[test]
fn log_text_strips_control_characters() {
    let cases = [
        ("plain text", "plain text"),
        ("bad\u{1b}[31m\nthing", "bad[31mthing"),
        ("a\0b\u{7}c\td\re\nf", "abcdef"),
        ("del\u{7f}eted", "deleted"),
        ("c1\u{85}\u{9f}x", "c1x"),
        ("\u{1}\u{2}\u{1f}", ""),
        ("", ""),
        ("unicode é 世界 stays", "unicode é 世界 stays"),
    ];
    for (input, want) in cases {
        assert_eq!(log_text(input), want, "{input:?}");
    }
}

#[test]
fn log_text_cuts_at_200_bytes_on_a_char_boundary() {
    assert_eq!(LOG_TEXT_MAX, 200);
    let a = |n: usize| "a".repeat(n);
    let cases: Vec<(String, String)> = vec![
        (a(199), a(199)),
        (a(200), a(200)),
        (a(201), a(200)),
        (a(1000), a(200)),
        // A 2-byte character ending exactly at the bound stays; one past it is left out.
        (format!("{}é", a(198)), format!("{}é", a(198))),
        (format!("{}é", a(199)), a(199)),
        // 3-byte and 4-byte characters straddling the bound.
        (format!("{}€", a(197)), format!("{}€", a(197))),
        (format!("{}€", a(198)), a(198)),
        (format!("{}😀", a(196)), format!("{}😀", a(196))),
        (format!("{}😀x", a(197)), a(197)),
        ("é".repeat(150), "é".repeat(100)),
        // Stripped control characters do not count.
        (format!("{}{}", "\n".repeat(50), a(200)), a(200)),
        (format!("{}\u{7}b", a(199)), format!("{}b", a(199))),
    ];
    for (input, want) in cases {
        let got = log_text(&input);
        assert_eq!(got, want, "input of {} bytes", input.len());
        assert!(got.len() <= LOG_TEXT_MAX);
    }
}

#[test]
fn webhook_bodies_are_occurrences_or_envelopes() {
    use mcp_wire::events::WebhookBody;
    let occurrence = WebhookBody::decode(
        br#"{"eventId":"e1","name":"t","timestamp":"2026-11-30T06:00:00Z","data":{"a":1},"cursor":"c1"}"#,
    )
    .unwrap();
    let WebhookBody::Occurrence(o) = occurrence else {
        panic!("{occurrence:?}")
    };
    assert_eq!(
        (o.event_id.as_str(), o.cursor),
        ("e1", Some(Some("c1".into())))
    );
    assert_eq!(
        WebhookBody::decode(br#"{"type":"verification","challenge":"n0nce"}"#).unwrap(),
        WebhookBody::Verification {
            challenge: "n0nce".into()
        }
    );
    let WebhookBody::Terminated { error } = WebhookBody::decode(
        br#"{"type":"terminated","error":{"code":-32024,"message":"revoked"}}"#,
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!(error.code, -32024);
    for bad in [
        &br#"[]"#[..],
        br#"{"type":"party"}"#,
        br#"{"type":"gap","cursor":5}"#,
        br#"{"eventId":"e1","name":"t"}"#,
        b"not json",
    ] {
        assert!(
            WebhookBody::decode(bad).is_err(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
}

/// The caller's own keys are written beside the client's, never over them, and no key is
/// written twice (a duplicate key would make the object ambiguous JSON).
#[test]
fn the_callers_keys_never_repeat_or_replace_the_clients() {
    let info = Implementation::new("my-client", "0.1.0");
    let caps = ClientCapabilities::none();
    let rendered = ModernMeta {
        revision: Revision::V2026_07_28,
        client_info: &info,
        client_capabilities: &caps,
    }
    .render()
    .unwrap();
    let token = mcp_wire::ProgressToken::Number(4);
    let extra = object(json!({
        "progressToken": "theirs",
        "io.modelcontextprotocol/clientInfo": {"name": "theirs"},
        "example.com/run": "r-1",
    }));
    let mut meta = mcp_wire::RequestMeta::default();
    meta.modern = Some(&rendered);
    meta.progress_token = Some(&token);
    meta.extra = Some(&extra);
    let params = CallToolParams::new("add");
    let mut text = Vec::new();
    mcp_wire::encode_request_with_meta(
        &mut text,
        &mcp_wire::RequestId::Number(1),
        "tools/call",
        &params,
        &meta,
    )
    .unwrap();
    let text = String::from_utf8(text).unwrap();
    for key in [
        "\"progressToken\"",
        "\"io.modelcontextprotocol/clientInfo\"",
        "\"example.com/run\"",
    ] {
        assert_eq!(text.matches(key).count(), 1, "{key} in {text}");
    }
    let value: Value = serde_json::from_str(&text).unwrap();
    let meta = &value["params"]["_meta"];
    assert_eq!(meta["progressToken"], 4);
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"],
        "my-client"
    );
    assert_eq!(meta["example.com/run"], "r-1");
}

/// `_meta` joins params of any object shape, the empty one too; params that are not an object
/// cannot carry it, and a request that cannot be written leaves the buffer as it was.
#[test]
fn meta_joins_object_params_and_refuses_others() {
    let token = mcp_wire::ProgressToken::Number(4);
    let mut meta = mcp_wire::RequestMeta::default();
    meta.progress_token = Some(&token);
    let id = mcp_wire::RequestId::Number(1);
    let written = |params: &Value, meta: &mcp_wire::RequestMeta| {
        let mut out = b"kept".to_vec();
        let result = mcp_wire::encode_request_with_meta(&mut out, &id, "m", params, meta);
        (result, String::from_utf8(out).unwrap())
    };
    assert_eq!(
        written(&json!({}), &meta).1,
        r#"kept{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":4}}}"#
    );
    assert_eq!(
        written(&json!({"a": {}}), &meta).1,
        r#"kept{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":{},"_meta":{"progressToken":4}}}"#
    );
    // Raw params keep their whitespace; `_meta` joins them as members all the same.
    for (raw, joined) in [
        ("{ }", r#"{"_meta":{"progressToken":4}}"#),
        (
            "{\n \"a\": 1 \n}",
            "{\n \"a\": 1,\"_meta\":{\"progressToken\":4}}",
        ),
    ] {
        let params = serde_json::value::RawValue::from_string(raw.into()).unwrap();
        let mut out = Vec::new();
        mcp_wire::encode_request_with_meta(&mut out, &id, "m", &params, &meta).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.ends_with(&format!(r#""params":{joined}}}"#)), "{text}");
        serde_json::from_str::<Value>(&text).unwrap();
    }
    // With nothing to add, any params are written as they are.
    assert_eq!(
        written(&json!([1]), &mcp_wire::RequestMeta::default()).1,
        r#"kept{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}"#
    );
    for params in [json!([1]), json!(null), json!("{}"), json!(7)] {
        let (result, out) = written(&params, &meta);
        assert!(
            matches!(result, Err(Error::Encode { .. })),
            "{params}: {result:?}"
        );
        assert_eq!(out, "kept", "{params}");
    }
    // A value that does not serialize: the buffer is left as it was.
    let mut keyed = std::collections::BTreeMap::new();
    keyed.insert((1, 2), 3);
    let mut out = b"kept".to_vec();
    let result = mcp_wire::encode_request(&mut out, &id, "m", Some(&keyed));
    assert!(matches!(result, Err(Error::Encode { .. })), "{result:?}");
    assert_eq!(out, b"kept");
}
