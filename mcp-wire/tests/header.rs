//! Integration tests of the 2026-07-28 header rules: `x-mcp-header` validation
//! ([`mcp_wire::ToolHeaders`]), `Mcp-Param-*` derivation, and the `=?base64?…?=` value encoding
//! ([`mcp_wire::header::encode_value`], [`mcp_wire::header::decode_value`]).
//!
//! The rules, as the spec digest (§2.7) quotes `server/tools.mdx` §x-mcp-header:
//!
//! > Valid only if: non-empty; RFC 9110 token chars; no CR/LF/control; unique
//! > case-insensitively within the schema; on a property of type string, integer
//! > or boolean (not `number`; integers within ±(2^53−1)); reachable from the root
//! > purely through `properties` keys (not via `items`, `oneOf/anyOf/allOf/not`,
//! > `if/then/else`, `$ref`).
//!
//! > Value at the exact property path; absent or `null` → omit header.
//! > Stringify: string as-is, integer decimal, boolean `true`/`false`.
//!
//! > **Encoding:** if the value is not safe plain ASCII (non-ASCII, control
//! > chars, leading/trailing whitespace) or itself looks like the sentinel,
//! > send `=?base64?<base64 of UTF-8>?=` (markers lower-case, exact).

use mcp_wire::header::{ANNOTATION, MAX_SAFE_INTEGER, PARAM_PREFIX, decode_value, encode_value};
use mcp_wire::{Error, InvalidAnnotation, RawJson, ToolHeaders};
use serde_json::{Map, Value, json};

fn headers(schema: &Value) -> ToolHeaders {
    ToolHeaders::from_value(schema)
        .unwrap_or_else(|e| panic!("{schema}: expected valid, got {e:?}"))
}

/// `(name, path)` of every header, in order.
fn names_and_paths(h: &ToolHeaders) -> Vec<(String, Vec<String>)> {
    h.headers()
        .iter()
        .map(|p| (p.name.clone(), p.path.clone()))
        .collect()
}

fn one_property(property: &Value) -> Value {
    json!({"type":"object","properties":{"p": property}})
}

fn args(v: &Value) -> &Map<String, Value> {
    v.as_object().expect("arguments are an object")
}

// ---------------------------------------------------------------------------------------------
// Constants.
// ---------------------------------------------------------------------------------------------

#[test]
fn constants_match_the_spec() {
    assert_eq!(ANNOTATION, "x-mcp-header");
    assert_eq!(PARAM_PREFIX, "Mcp-Param-");
    assert_eq!(MAX_SAFE_INTEGER, 9_007_199_254_740_991);
    assert_eq!(MAX_SAFE_INTEGER, (1i64 << 53) - 1);
}

// ---------------------------------------------------------------------------------------------
// Valid schemas.
// ---------------------------------------------------------------------------------------------

/// A table row: what the case is, the schema, and the `(name, path)` of each header.
type ValidCase = (&'static str, Value, Vec<(&'static str, Vec<&'static str>)>);

#[test]
fn valid_schemas_and_the_headers_they_give() {
    let cases: Vec<ValidCase> = vec![
        ("no properties", json!({"type":"object"}), vec![]),
        ("empty object", json!({}), vec![]),
        (
            "unannotated properties",
            json!({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number"}}}),
            vec![],
        ),
        (
            "one string",
            json!({"type":"object","properties":{
                "region":{"type":"string","x-mcp-header":"Region"},
                "query":{"type":"string"}}}),
            vec![("Region", vec!["region"])],
        ),
        (
            "integer",
            one_property(&json!({"type":"integer","x-mcp-header":"Count"})),
            vec![("Count", vec!["p"])],
        ),
        (
            "boolean",
            one_property(&json!({"type":"boolean","x-mcp-header":"Dry-Run"})),
            vec![("Dry-Run", vec!["p"])],
        ),
        (
            "several headers, in order",
            json!({"type":"object","properties":{
                "a":{"type":"string","x-mcp-header":"Alpha"},
                "b":{"type":"integer","x-mcp-header":"Beta"},
                "c":{"type":"boolean","x-mcp-header":"Gamma"},
                "d":{"type":"array","items":{"type":"string"}}}}),
            vec![
                ("Alpha", vec!["a"]),
                ("Beta", vec!["b"]),
                ("Gamma", vec!["c"]),
            ],
        ),
        (
            "nested through properties",
            json!({"type":"object","properties":{"a":{"type":"object","properties":{
                "b":{"type":"string","x-mcp-header":"Nested"}}}}}),
            vec![("Nested", vec!["a", "b"])],
        ),
        (
            "three levels deep",
            json!({"properties":{"a":{"properties":{"b":{"properties":{
                "c":{"type":"integer","x-mcp-header":"Deep"}}}}}}}),
            vec![("Deep", vec!["a", "b", "c"])],
        ),
        (
            "every tchar",
            one_property(&json!({"type":"string","x-mcp-header":"aZ09!#$%&'*+-.^_`|~"})),
            vec![("aZ09!#$%&'*+-.^_`|~", vec!["p"])],
        ),
        (
            "a property NAMED x-mcp-header is not an annotation",
            json!({"type":"object","properties":{"x-mcp-header":{"type":"object"}}}),
            vec![],
        ),
        (
            "a property named x-mcp-header may itself be annotated",
            json!({"type":"object","properties":{
                "x-mcp-header":{"type":"string","x-mcp-header":"Named"}}}),
            vec![("Named", vec!["x-mcp-header"])],
        ),
        (
            "a property named x-mcp-header whose value is not a schema",
            json!({"type":"object","properties":{"x-mcp-header":"Region"}}),
            vec![],
        ),
        (
            "properties named like keywords are still properties",
            json!({"type":"object","properties":{
                "items":{"type":"string","x-mcp-header":"I"},
                "oneOf":{"type":"string","x-mcp-header":"O"},
                "$defs":{"type":"string","x-mcp-header":"D"}}}),
            vec![
                ("D", vec!["$defs"]),
                ("I", vec!["items"]),
                ("O", vec!["oneOf"]),
            ],
        ),
        (
            "unannotated subschemas under other keywords",
            json!({"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A"}},
                "$defs":{"d":{"type":"string"}},"oneOf":[{"required":["a"]}],
                "items":{"type":"string"}}),
            vec![("A", vec!["a"])],
        ),
        (
            "the annotation keyword inside a non-schema value",
            json!({"type":"object","properties":{"a":{"type":"object",
                "default":{"x-mcp-header":"NotAnAnnotation"},
                "examples":[{"x-mcp-header":"Nor"}],
                "const":{"x-mcp-header":"This"}}}}),
            vec![],
        ),
        (
            "case-different names on different properties are fine when distinct",
            json!({"type":"object","properties":{
                "a":{"type":"string","x-mcp-header":"Tenant"},
                "b":{"type":"string","x-mcp-header":"Tenant-Id"}}}),
            vec![("Tenant", vec!["a"]), ("Tenant-Id", vec!["b"])],
        ),
    ];
    for (what, schema, want) in cases {
        let got = names_and_paths(&headers(&schema));
        let want: Vec<(String, Vec<String>)> = want
            .into_iter()
            .map(|(n, p)| (n.to_owned(), p.into_iter().map(str::to_owned).collect()))
            .collect();
        assert_eq!(got, want, "{what}");
        assert_eq!(headers(&schema).is_empty(), want.is_empty(), "{what}");
    }
}

#[test]
fn from_schema_reads_raw_json() {
    let schema = RawJson::from_text(
        r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}"#,
    )
    .unwrap();
    let h = ToolHeaders::from_schema(&schema).unwrap();
    assert_eq!(
        names_and_paths(&h),
        [("Region".to_owned(), vec!["region".to_owned()])]
    );
}

// ---------------------------------------------------------------------------------------------
// Invalid annotations, one table case per rule and per keyword.
// ---------------------------------------------------------------------------------------------

#[test]
fn schema_not_an_object() {
    for schema in [
        json!(null),
        json!(true),
        json!(1),
        json!("object"),
        json!([{"x-mcp-header":"A"}]),
    ] {
        assert_eq!(
            ToolHeaders::from_value(&schema),
            Err(InvalidAnnotation::Schema),
            "{schema}"
        );
    }
    for text in ["[]", "true", "\"s\"", "3"] {
        let raw = RawJson::from_text(text).unwrap();
        assert_eq!(
            ToolHeaders::from_schema(&raw),
            Err(Error::InvalidHeaderAnnotation(InvalidAnnotation::Schema)),
            "{text}"
        );
    }
}

#[test]
fn annotation_not_a_string() {
    for value in [
        json!(1),
        json!(true),
        json!(null),
        json!(["Region"]),
        json!({"name":"Region"}),
    ] {
        let schema = one_property(&json!({"type":"string","x-mcp-header": value}));
        assert_eq!(
            ToolHeaders::from_value(&schema),
            Err(InvalidAnnotation::NotAString { path: "p".into() }),
            "{value}"
        );
    }
    let nested =
        json!({"properties":{"a":{"properties":{"b":{"type":"string","x-mcp-header":7}}}}});
    assert_eq!(
        ToolHeaders::from_value(&nested),
        Err(InvalidAnnotation::NotAString { path: "a.b".into() })
    );
}

#[test]
fn annotation_empty() {
    for ty in ["string", "integer", "boolean"] {
        let schema = one_property(&json!({"type": ty, "x-mcp-header": ""}));
        assert_eq!(
            ToolHeaders::from_value(&schema),
            Err(InvalidAnnotation::Empty { path: "p".into() }),
            "{ty}"
        );
    }
}

#[test]
fn annotation_with_a_character_outside_rfc9110_tchar() {
    for name in [
        "Has Space",
        " Lead",
        "Trail ",
        "Colon:",
        "Slash/x",
        "Paren(",
        "Paren)",
        "At@",
        "Quote\"",
        "Comma,",
        "Semi;",
        "Equals=",
        "Question?",
        "Bracket[",
        "Bracket]",
        "Brace{",
        "Brace}",
        "Back\\slash",
        "Less<",
        "More>",
        "Tab\t",
        "CR\r",
        "LF\n",
        "CRLF\r\nInjected: 1",
        "Nul\0",
        "Bell\u{7}",
        "Del\u{7f}",
        "Unicode\u{e9}",
        "\u{4e16}\u{754c}",
        "C1\u{85}",
    ] {
        let schema = one_property(&json!({"type":"string","x-mcp-header": name}));
        assert_eq!(
            ToolHeaders::from_value(&schema),
            Err(InvalidAnnotation::BadCharacter {
                name: name.to_owned()
            }),
            "{name:?}"
        );
    }
}

#[test]
fn annotation_duplicated_regardless_of_case() {
    let cases = [
        ("Region", "Region"),
        ("Region", "region"),
        ("Region", "REGION"),
        ("x-Tenant", "X-tENANT"),
    ];
    for (first, second) in cases {
        let schema = json!({"type":"object","properties":{
            "a":{"type":"string","x-mcp-header": first},
            "b":{"type":"string","x-mcp-header": second}}});
        assert_eq!(
            ToolHeaders::from_value(&schema),
            Err(InvalidAnnotation::Duplicate {
                name: second.to_owned()
            }),
            "{first} / {second}"
        );
    }
    // Across nesting levels too.
    let schema = json!({"type":"object","properties":{
        "a":{"type":"string","x-mcp-header":"Same"},
        "b":{"type":"object","properties":{"c":{"type":"integer","x-mcp-header":"SAME"}}}}});
    assert_eq!(
        ToolHeaders::from_value(&schema),
        Err(InvalidAnnotation::Duplicate {
            name: "SAME".into()
        })
    );
}

#[test]
fn annotation_on_an_unsupported_type() {
    for ty in [
        json!("number"),
        json!("object"),
        json!("array"),
        json!("null"),
        json!(["string", "null"]),
        json!(["integer"]),
        json!(null),
        json!(1),
    ] {
        let schema = one_property(&json!({"type": ty, "x-mcp-header": "H"}));
        assert_eq!(
            ToolHeaders::from_value(&schema),
            Err(InvalidAnnotation::UnsupportedType { name: "H".into() }),
            "{ty}"
        );
    }
    // No `type` at all.
    let schema = one_property(&json!({"x-mcp-header": "H"}));
    assert_eq!(
        ToolHeaders::from_value(&schema),
        Err(InvalidAnnotation::UnsupportedType { name: "H".into() })
    );
    let schema = one_property(&json!({"enum":["a","b"],"x-mcp-header": "H"}));
    assert_eq!(
        ToolHeaders::from_value(&schema),
        Err(InvalidAnnotation::UnsupportedType { name: "H".into() })
    );
}

#[test]
fn annotation_not_statically_reachable() {
    let annotated = json!({"type":"string","x-mcp-header":"H"});
    let a = &annotated;
    let cases: Vec<(&str, Value)> = vec![
        ("items", json!({"type":"array","items": a})),
        ("items (array form)", json!({"type":"array","items":[a]})),
        (
            "prefixItems",
            json!({"type":"array","prefixItems":[{"type":"string"}, a]}),
        ),
        (
            "additionalItems",
            json!({"type":"array","additionalItems": a}),
        ),
        (
            "unevaluatedItems",
            json!({"type":"array","unevaluatedItems": a}),
        ),
        ("contains", json!({"type":"array","contains": a})),
        ("oneOf", json!({"oneOf":[a]})),
        ("anyOf", json!({"anyOf":[{"type":"integer"}, a]})),
        ("allOf", json!({"allOf":[a]})),
        ("not", json!({"not": a})),
        ("if", json!({"if": a})),
        ("then", json!({"if":{"type":"string"},"then": a})),
        ("else", json!({"if":{"type":"string"},"else": a})),
        (
            "$ref target in $defs",
            json!({"properties":{"r":{"$ref":"#/$defs/d"}},"$defs":{"d": a}}),
        ),
        ("definitions", json!({"definitions":{"d": a}})),
        ("$ref as an inline object", json!({"$ref": a})),
        (
            "additionalProperties",
            json!({"type":"object","additionalProperties": a}),
        ),
        (
            "unevaluatedProperties",
            json!({"type":"object","unevaluatedProperties": a}),
        ),
        (
            "patternProperties",
            json!({"type":"object","patternProperties":{"^x": a}}),
        ),
        ("propertyNames", json!({"type":"object","propertyNames": a})),
        (
            "dependentSchemas",
            json!({"type":"object","dependentSchemas":{"k": a}}),
        ),
        (
            "dependencies",
            json!({"type":"object","dependencies":{"k": a}}),
        ),
    ];
    for (keyword, schema) in cases {
        let got = ToolHeaders::from_value(&schema);
        assert!(
            matches!(got, Err(InvalidAnnotation::NotStaticallyReachable { .. })),
            "{keyword}: {got:?}"
        );
    }
}

#[test]
fn not_statically_reachable_below_properties_and_above_them() {
    let annotated = json!({"type":"string","x-mcp-header":"H"});
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "items under a property",
            json!({"properties":{"list":{"type":"array","items": annotated}}}),
            "list.items",
        ),
        (
            "properties under items",
            json!({"properties":{"list":{"type":"array","items":{"type":"object",
                "properties":{"x": annotated}}}}}),
            "list.items.x",
        ),
        (
            "properties under oneOf",
            json!({"oneOf":[{"properties":{"x": annotated}}]}),
            "oneOf.x",
        ),
        (
            "properties under a $defs entry",
            json!({"$defs":{"d":{"properties":{"x": annotated}}}}),
            "$defs.x",
        ),
        (
            "additionalProperties under a property",
            json!({"properties":{"m":{"type":"object","additionalProperties": annotated}}}),
            "m.additionalProperties",
        ),
    ];
    for (what, schema, path) in cases {
        assert_eq!(
            ToolHeaders::from_value(&schema),
            Err(InvalidAnnotation::NotStaticallyReachable { path: path.into() }),
            "{what}"
        );
    }
}

#[test]
fn an_unreachable_annotation_invalidates_a_schema_with_valid_ones() {
    let schema = json!({"type":"object","properties":{
        "a":{"type":"string","x-mcp-header":"A"},
        "b":{"type":"array","items":{"type":"string","x-mcp-header":"B"}}}});
    assert!(matches!(
        ToolHeaders::from_value(&schema),
        Err(InvalidAnnotation::NotStaticallyReachable { .. })
    ));
    let raw = RawJson::from_value(&schema).unwrap();
    assert!(matches!(
        ToolHeaders::from_schema(&raw),
        Err(Error::InvalidHeaderAnnotation(
            InvalidAnnotation::NotStaticallyReachable { .. }
        ))
    ));
}

#[test]
fn annotation_at_the_root_is_refused() {
    let schema = json!({"type":"string","x-mcp-header":"Root"});
    let got = ToolHeaders::from_value(&schema);
    assert!(got.is_err(), "{got:?}");
}

// ---------------------------------------------------------------------------------------------
// derive.
// ---------------------------------------------------------------------------------------------

fn derive_one(ty: &str, value: Option<Value>) -> Result<Vec<(String, String)>, Error> {
    let h = headers(&one_property(&json!({"type": ty, "x-mcp-header":"V"})));
    let mut arguments = Map::new();
    arguments.insert("other".into(), json!("ignored"));
    if let Some(v) = value {
        arguments.insert("p".into(), v);
    }
    h.derive(Some(&arguments))
}

fn one_header(value: &str) -> Vec<(String, String)> {
    vec![("Mcp-Param-V".to_owned(), value.to_owned())]
}

#[test]
fn derive_omits_absent_and_null_arguments() {
    assert_eq!(derive_one("string", None).unwrap(), vec![]);
    assert_eq!(derive_one("string", Some(Value::Null)).unwrap(), vec![]);
    let h = headers(&one_property(&json!({"type":"string","x-mcp-header":"V"})));
    assert_eq!(h.derive(None).unwrap(), vec![]);
    assert_eq!(h.derive(Some(&Map::new())).unwrap(), vec![]);
}

#[test]
fn derive_stringifies_values() {
    let cases: Vec<(&str, Value, &str)> = vec![
        ("string", json!("us-west1"), "us-west1"),
        ("string", json!(""), ""),
        ("string", json!("a b"), "a b"),
        ("integer", json!(42), "42"),
        ("integer", json!(0), "0"),
        ("integer", json!(-17), "-17"),
        ("integer", json!(42.0), "42"),
        ("integer", json!(-3.0), "-3"),
        ("integer", json!(-0.0), "0"),
        ("boolean", json!(true), "true"),
        ("boolean", json!(false), "false"),
        // The value is stringified by its JSON type, not the schema's.
        ("string", json!(5), "5"),
        ("integer", json!("five"), "five"),
    ];
    for (ty, value, want) in cases {
        assert_eq!(
            derive_one(ty, Some(value.clone())).unwrap(),
            one_header(want),
            "{ty} {value}"
        );
    }
}

#[test]
fn derive_encodes_values_that_are_not_plain() {
    let cases = [
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
    ];
    for (value, want) in cases {
        assert_eq!(
            derive_one("string", Some(json!(value))).unwrap(),
            one_header(want),
            "{value:?}"
        );
    }
}

#[test]
fn derive_integers_at_the_safe_bound_and_past_it() {
    let max = MAX_SAFE_INTEGER;
    let ok: Vec<(Value, String)> = vec![
        (json!(max), max.to_string()),
        (json!(-max), (-max).to_string()),
        (
            json!(9_007_199_254_740_991.0_f64),
            "9007199254740991".into(),
        ),
        (
            json!(-9_007_199_254_740_991.0_f64),
            "-9007199254740991".into(),
        ),
    ];
    for (value, want) in ok {
        assert_eq!(
            derive_one("integer", Some(value.clone())).unwrap(),
            one_header(&want),
            "{value}"
        );
    }
    for value in [
        json!(max + 1),
        json!(-(max + 1)),
        json!(9_007_199_254_740_992.0_f64),
        json!(-9_007_199_254_740_992.0_f64),
        json!(i64::MAX),
        json!(u64::MAX),
        json!(1e300),
        json!(-1e300),
    ] {
        let got = derive_one("integer", Some(value.clone()));
        assert!(
            matches!(&got, Err(Error::HeaderValue { name, .. }) if name == "V"),
            "{value}: {got:?}"
        );
    }
}

#[test]
fn derive_refuses_i64_min() {
    let got = derive_one("integer", Some(json!(i64::MIN)));
    assert!(
        matches!(&got, Err(Error::HeaderValue { name, .. }) if name == "V"),
        "{got:?}"
    );
}

#[test]
fn derive_refuses_non_integer_numbers_objects_and_arrays() {
    for (ty, value) in [
        ("integer", json!(1.5)),
        ("integer", json!(-0.25)),
        ("integer", json!(1e-9)),
        ("integer", json!(4_503_599_627_370_495.5_f64)),
        ("string", json!({"a":1})),
        ("string", json!({})),
        ("string", json!([])),
        ("string", json!(["a"])),
        ("boolean", json!([true])),
    ] {
        let got = derive_one(ty, Some(value.clone()));
        match &got {
            Err(Error::HeaderValue { name, detail }) => {
                assert_eq!(name, "V", "{value}");
                assert!(!detail.is_empty(), "{value}");
            }
            other => panic!("{ty} {value}: expected HeaderValue, got {other:?}"),
        }
    }
}

#[test]
fn derive_follows_nested_paths() {
    let h = headers(&json!({"type":"object","properties":{
        "top":{"type":"string","x-mcp-header":"Top"},
        "outer":{"type":"object","properties":{
            "inner":{"type":"integer","x-mcp-header":"Inner"}}}}}));
    let cases: Vec<(Value, Vec<(&str, &str)>)> = vec![
        (
            json!({"top":"t","outer":{"inner":7}}),
            vec![("Mcp-Param-Inner", "7"), ("Mcp-Param-Top", "t")],
        ),
        (
            json!({"outer":{"inner":-7}}),
            vec![("Mcp-Param-Inner", "-7")],
        ),
        (json!({"outer":{"inner":null}}), vec![]),
        (json!({"outer":{}}), vec![]),
        (json!({"outer":null}), vec![]),
        (json!({"outer":"not an object"}), vec![]),
        (json!({"outer":[{"inner":1}]}), vec![]),
        // The path is exact: `inner` at the top level is not `outer.inner`.
        (json!({"inner":3}), vec![]),
    ];
    for (arguments, want) in cases {
        let got = h.derive(Some(args(&arguments))).unwrap();
        let mut got_sorted = got.clone();
        got_sorted.sort();
        let want: Vec<(String, String)> = want
            .into_iter()
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(got_sorted, want, "{arguments}");
    }
}

#[test]
fn derive_names_the_header_with_the_prefix_and_the_annotation_as_written() {
    let h = headers(&json!({"type":"object","properties":{
        "a":{"type":"string","x-mcp-header":"region"},
        "b":{"type":"string","x-mcp-header":"X_Odd.Name~1"}}}));
    let got = h.derive(Some(args(&json!({"a":"x","b":"y"})))).unwrap();
    assert_eq!(
        got,
        vec![
            ("Mcp-Param-region".to_owned(), "x".to_owned()),
            ("Mcp-Param-X_Odd.Name~1".to_owned(), "y".to_owned()),
        ]
    );
    for (name, _) in &got {
        assert!(name.starts_with(PARAM_PREFIX));
    }
}

#[test]
fn derive_reports_the_first_bad_value_with_its_name() {
    let h = headers(&json!({"type":"object","properties":{
        "a":{"type":"string","x-mcp-header":"Good"},
        "b":{"type":"integer","x-mcp-header":"Bad"}}}));
    let got = h.derive(Some(args(&json!({"a":"ok","b":2.5}))));
    assert!(
        matches!(&got, Err(Error::HeaderValue { name, .. }) if name == "Bad"),
        "{got:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// encode_value / decode_value.
// ---------------------------------------------------------------------------------------------

#[test]
fn encode_value_follows_the_spec_table() {
    let cases = [
        // The spec's table.
        ("us-west1", "us-west1"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        // More rows.
        ("", ""),
        ("a b", "a b"),
        (
            "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
            "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
        ),
        ("a\tb", "=?base64?YQli?="),
        ("\t", "=?base64?CQ==?="),
        ("a\u{7f}b", "=?base64?YX9i?="),
        ("\u{7f}", "=?base64?fw==?="),
        ("\0", "=?base64?AA==?="),
        ("\r\n", "=?base64?DQo=?="),
        (" lead", "=?base64?IGxlYWQ=?="),
        ("trail ", "=?base64?dHJhaWwg?="),
        (" ", "=?base64?IA==?="),
        ("é", "=?base64?w6k=?="),
        ("=?base64??=", "=?base64?PT9iYXNlNjQ/Pz0=?="),
        // Only the exact lower-case markers make the sentinel shape.
        ("=?BASE64?x?=", "=?BASE64?x?="),
        ("=?base64?x", "=?base64?x"),
        ("x?=", "x?="),
    ];
    for (value, want) in cases {
        assert_eq!(encode_value(value), want, "{value:?}");
        assert_eq!(decode_value(want).unwrap(), value, "{want:?}");
    }
}

#[test]
fn encode_value_borrows_plain_values() {
    assert!(matches!(
        encode_value("us-west1"),
        std::borrow::Cow::Borrowed("us-west1")
    ));
    assert!(matches!(
        encode_value("Hello, 世界"),
        std::borrow::Cow::Owned(_)
    ));
}

#[test]
fn decode_value_passes_plain_values_through() {
    for value in [
        "us-west1",
        "",
        "a b",
        "=?base64?",
        "?=",
        "=?base64?=",
        "=?BASE64?SGk=?=",
    ] {
        assert_eq!(decode_value(value).unwrap(), value, "{value:?}");
    }
}

#[test]
fn decode_value_refuses_bad_base64_and_non_utf8() {
    for value in [
        // Not base64.
        "=?base64?!!!!?=",
        "=?base64?SGVsbG8*?=",
        "=?base64?SGVsbG8 ?=",
        // Wrong length or padding.
        "=?base64?A?=",
        "=?base64?SGk?=",
        "=?base64?SGk=A?=",
        "=?base64?S===?=",
        "=?base64?SG==SG==?=",
        // Non-canonical (stray bits before the padding).
        "=?base64?SGl=?=",
        "=?base64?QR==?=",
        // URL-safe alphabet.
        "=?base64?-_-_?=",
        // Valid base64, not UTF-8.
        "=?base64?/w==?=",
        "=?base64?gA==?=",
        "=?base64?wyg=?=",
        "=?base64?7aCA?=",
    ] {
        assert_eq!(decode_value(value), Err(Error::EncodedHeader), "{value:?}");
    }
}

#[test]
fn decode_value_accepts_empty_sentinel() {
    assert_eq!(decode_value("=?base64??=").unwrap(), "");
}
