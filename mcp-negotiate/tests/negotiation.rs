//! The negotiation machine, row by row and bullet by bullet of the reference's
//! "Negotiation" table.

use mcp_negotiate::{Negotiation, Progress, Reply, Start, Step};
use mcp_wire::{DiscoverResult, InitializeResult, Revision};
use serde_json::{Value, json};

const MODERN: Revision = Revision::V2026_07_28;
const PROBE: Step = Step::Discover { revision: MODERN };

fn init(revision: Revision) -> Step {
    Step::Initialize { revision }
}

fn discovered(versions: &[&str]) -> Reply {
    Reply::Discovered(
        serde_json::from_value::<DiscoverResult>(json!({
            "supportedVersions": versions,
            "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}},
        }))
        .expect("a discover result"),
    )
}

fn initialized(version: &str) -> Reply {
    Reply::Initialized(
        serde_json::from_value::<InitializeResult>(json!({
            "protocolVersion": version,
            "capabilities": {},
            "serverInfo": {"name": "s", "version": "1"},
        }))
        .expect("an initialize result"),
    )
}

fn unsupported(data: Option<Value>) -> Reply {
    Reply::rpc_error(-32022, data)
}

fn status(status: u16) -> Reply {
    Reply::Status {
        status,
        www_authenticate: None,
    }
}

/// Feeds the probe `reply` and returns what follows.
fn after_probe(reply: Reply) -> Progress {
    Negotiation::new(Start::Probe).on_reply(reply)
}

fn failed_with(progress: &Progress, refusals: usize) -> bool {
    matches!(progress, Progress::Failed(f) if f.refusals.len() == refusals)
}

#[test]
fn every_connection_probes_first() {
    assert_eq!(Negotiation::new(Start::Probe).step(), PROBE);
}

#[test]
fn a_discover_result_listing_2026_07_28_connects() {
    let Progress::Connected(c) = after_probe(discovered(&["2026-07-28", "2025-11-25"])) else {
        panic!("not connected");
    };
    assert_eq!(c.revision, MODERN);
    assert_eq!(c.reached_by, PROBE);
    assert_eq!(c.server_info.expect("server info").name, "s");
    assert!(c.capabilities.tools());
}

#[test]
fn a_32022_naming_2026_07_28_asks_again_at_that_revision_once() {
    let mut n = Negotiation::new(Start::Probe);
    let data = Some(json!({"supported": ["2026-07-28"], "requested": "2026-07-28"}));
    assert_eq!(n.on_reply(unsupported(data.clone())), Progress::Send(PROBE));
    assert!(matches!(
        n.clone().on_reply(discovered(&["2026-07-28"])),
        Progress::Connected(_)
    ));
    // The same answer again: no third probe; both refusals are named.
    assert!(failed_with(&n.on_reply(unsupported(data)), 2));
}

#[test]
fn older_revisions_only_lead_to_initialize_at_the_newest_known() {
    let cases: [(Reply, Revision); 5] = [
        (
            unsupported(Some(json!({"supported": ["2025-06-18", "2024-11-05"]}))),
            Revision::V2025_06_18,
        ),
        (
            unsupported(Some(json!({"supported": ["1999-01-01", "2025-11-25"]}))),
            Revision::V2025_11_25,
        ),
        (discovered(&["2025-11-25"]), Revision::V2025_11_25),
        // Only revisions older than 2025-11-25: the newest it lists that we know.
        (
            discovered(&["2025-03-26", "2024-11-05", "1999-01-01"]),
            Revision::V2025_03_26,
        ),
        (
            unsupported(Some(json!({"supported": ["2024-11-05"]}))),
            Revision::V2024_11_05,
        ),
    ];
    for (reply, revision) in cases {
        let shown = format!("{reply:?}");
        assert_eq!(
            after_probe(reply),
            Progress::Send(init(revision)),
            "{shown}"
        );
    }
}

#[test]
fn a_32022_listing_nothing_leads_to_initialize_at_2025_11_25() {
    for data in [None, Some(json!({})), Some(json!({"supported": []}))] {
        assert_eq!(
            after_probe(unsupported(data.clone())),
            Progress::Send(init(Revision::V2025_11_25)),
            "{data:?}"
        );
    }
}

#[test]
fn refusals_fail_the_connect_and_are_named() {
    let cases = [
        Reply::rpc_error(-32020, None),
        Reply::rpc_error(
            -32021,
            Some(json!({"requiredCapabilities": {"elicitation": {}}})),
        ),
        Reply::Status {
            status: 401,
            www_authenticate: Some("Bearer".into()),
        },
        Reply::Unreachable("connection refused".into()),
        unsupported(Some(json!({"supported": ["1999-01-01"]}))),
        discovered(&["3000-01-01"]),
        discovered(&[]),
    ];
    for reply in cases {
        let shown = format!("{reply:?}");
        let progress = after_probe(reply);
        assert!(failed_with(&progress, 1), "{shown} gave {progress:?}");
        let Progress::Failed(f) = progress else {
            unreachable!()
        };
        assert!(
            f.to_string().starts_with("server/discover refused: "),
            "{f}"
        );
    }
}

#[test]
fn anything_else_leads_to_initialize_at_2025_11_25() {
    let cases = [
        Reply::rpc_error(-32601, None),
        Reply::rpc_error(-32602, None),
        Reply::rpc_error(-32603, None),
        status(403),
        status(400),
        status(404),
        status(405),
        status(500),
        status(503),
        Reply::Unreadable("{}".into()),
        Reply::Accepted,
        Reply::Silent,
    ];
    for reply in cases {
        let shown = format!("{reply:?}");
        assert_eq!(
            after_probe(reply),
            Progress::Send(init(Revision::V2025_11_25)),
            "{shown}"
        );
    }
}

#[test]
fn the_fallback_connects_with_the_revision_the_server_answers() {
    let mut n = Negotiation::new(Start::Probe);
    let _ = n.on_reply(Reply::rpc_error(-32601, None));
    let Progress::Connected(c) = n.clone().on_reply(initialized("2025-11-25")) else {
        panic!("not connected");
    };
    assert_eq!(c.revision, Revision::V2025_11_25);
    assert_eq!(c.reached_by, init(Revision::V2025_11_25));
    // A server answering an older revision than offered is taken at its word.
    let Progress::Connected(c) = n.clone().on_reply(initialized("2025-03-26")) else {
        panic!("not connected");
    };
    assert_eq!(c.revision, Revision::V2025_03_26);
    // One it does not know, or a modern one through initialize, refuses.
    assert!(failed_with(
        &n.clone().on_reply(initialized("1999-01-01")),
        2
    ));
    assert!(failed_with(&n.on_reply(initialized("2026-07-28")), 2));
}

#[test]
fn a_fallback_refused_too_names_both_refusals_and_sends_nothing_twice() {
    for refusal in [
        Reply::rpc_error(-32602, None),
        status(400),
        status(401),
        status(500),
        Reply::Silent,
    ] {
        let mut n = Negotiation::new(Start::Probe);
        let mut sent = vec![n.step()];
        let mut progress = n.on_reply(Reply::rpc_error(-32601, None));
        while let Progress::Send(step) = progress {
            sent.push(step);
            progress = n.on_reply(refusal.clone());
        }
        assert_eq!(sent, [PROBE, init(Revision::V2025_11_25)], "{refusal:?}");
        let Progress::Failed(f) = progress else {
            panic!("{progress:?}")
        };
        assert_eq!(f.refusals.len(), 2, "{refusal:?}");
        let text = f.to_string();
        assert!(
            text.contains("server/discover refused") && text.contains("initialize refused"),
            "{text}"
        );
    }
}

#[test]
fn a_refused_initialize_probes_after_a_json_rpc_error_or_a_4xx_other_than_401() {
    let start = Start::Like(init(Revision::V2025_11_25));
    for reply in [
        Reply::rpc_error(-32602, None),
        Reply::rpc_error(-32601, None),
        status(400),
        status(404),
        status(403),
    ] {
        let shown = format!("{reply:?}");
        let mut n = Negotiation::new(start);
        assert_eq!(n.on_reply(reply), Progress::Send(PROBE), "{shown}");
        assert!(
            matches!(n.on_reply(discovered(&["2026-07-28"])), Progress::Connected(c) if c.revision == MODERN)
        );
    }
    for reply in [
        status(401),
        status(500),
        status(502),
        Reply::Silent,
        Reply::Unreachable("refused".into()),
    ] {
        let shown = format!("{reply:?}");
        let progress = Negotiation::new(start).on_reply(reply);
        assert!(
            failed_with(&progress, 1),
            "{shown} is not probed again: {progress:?}"
        );
    }
}

#[test]
fn a_redial_starts_the_way_the_followed_connection_got_there() {
    let mut n = Negotiation::new(Start::Probe);
    let _ = n.on_reply(status(404));
    let Progress::Connected(c) = n.on_reply(initialized("2025-11-25")) else {
        panic!("not connected");
    };
    let redial = Negotiation::new(Start::Like(c.reached_by));
    assert_eq!(redial.step(), init(Revision::V2025_11_25));

    let Progress::Connected(c) = after_probe(discovered(&["2026-07-28"])) else {
        panic!("not connected");
    };
    assert_eq!(Negotiation::new(Start::Like(c.reached_by)).step(), PROBE);
}
