//! Drives the negotiation machine from any start with any replies: DiscoverResults and -32022
//! errors listing known, unknown and malformed revisions, other JSON-RPC errors, statuses,
//! 202, unreadable answers, silence, unreachable servers, and `initialize` results at any
//! revision.
//!
//! Oracles: the negotiation ends connected or failed within 4 requests (5 from a start no
//! connection gives: `server/discover` at a legacy revision, after which the probe at
//! 2026-07-28 is one more request); no request is sent twice, but for the probe asked again
//! once at the revision a -32022 named; a `server/discover` is sent at a modern revision and
//! an `initialize` at a legacy one; a connection is at a revision its answer named, of the
//! era of the request that reached it; a failure names every refusal, one per reply, each
//! with the request it answered and the reply it got.

use mcp_negotiate::{Negotiation, Progress, Reply, Start, Step};
use mcp_wire::{DiscoverResult, Era, InitializeResult, Revision};
use serde_json::{Value, json};

use crate::Input;

/// Every known revision, revisions nobody knows, and near misses.
const VERSIONS: [&str; 10] = [
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
    "1999-01-01",
    "3000-01-01",
    "",
    "2026-07-28 ",
    "2025-11-25\n",
];

fn version(input: &mut Input) -> String {
    match usize::from(input.byte()) {
        n if n < 200 => VERSIONS[n % VERSIONS.len()].to_owned(),
        _ => String::from_utf8_lossy(input.bytes(16)).into_owned(),
    }
}

fn versions(input: &mut Input) -> Vec<String> {
    (0..input.byte() % 5).map(|_| version(input)).collect()
}

/// `data.supported` of a -32022: strings, and values that are not.
fn supported(input: &mut Input) -> Value {
    (0..input.byte() % 5)
        .map(|_| match input.byte() % 8 {
            0 => json!(20260728),
            1 => Value::Null,
            _ => version(input).into(),
        })
        .collect()
}

fn reply(input: &mut Input) -> Reply {
    match input.byte() % 14 {
        0 | 1 => {
            let mut result = json!({
                "supportedVersions": versions(input),
                "capabilities": {"tools": {}},
            });
            if input.bool() {
                result["_meta"] =
                    json!({"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}});
            }
            Reply::Discovered(
                serde_json::from_value::<DiscoverResult>(result).expect("a discover result"),
            )
        }
        2 | 3 => Reply::Initialized(
            serde_json::from_value::<InitializeResult>(json!({
                "protocolVersion": version(input),
                "capabilities": {},
                "serverInfo": {"name": "s", "version": "1"},
            }))
            .expect("an initialize result"),
        ),
        4 | 5 => Reply::rpc_error(
            -32022,
            match input.byte() % 5 {
                0 => None,
                1 => Some(json!({})),
                2 => Some(json!({"supported": version(input)})),
                3 => Some(json!({"supported": supported(input), "requested": "2026-07-28"})),
                _ => Some(json!({"supported": supported(input)})),
            },
        ),
        6 => Reply::rpc_error(
            input.pick(&[
                -32020, -32021, -32601, -32602, -32603, -32600, -32700, -32000, -32023, -32024,
                -32026, 0,
            ]),
            None,
        ),
        7 => Reply::rpc_error(
            i64::from(i16::from_le_bytes([input.byte(), input.byte()])),
            input.bool().then(|| json!({"supported": supported(input)})),
        ),
        8 => Reply::Status {
            status: input.pick(&[400, 401, 403, 404, 405, 406, 500, 502, 503]),
            www_authenticate: input.bool().then(|| "Bearer".to_owned()),
        },
        9 => Reply::Status {
            status: u16::from_le_bytes([input.byte(), input.byte()]) % 600,
            www_authenticate: None,
        },
        10 => Reply::Accepted,
        11 => Reply::Unreadable(String::from_utf8_lossy(input.bytes(8)).into_owned()),
        12 => Reply::Silent,
        _ => Reply::Unreachable(String::from_utf8_lossy(input.bytes(8)).into_owned()),
    }
}

/// The `negotiation` target: see the module docs.
pub fn negotiation(data: &[u8]) {
    let mut input = Input(data);
    let start = match input.byte() % 3 {
        0 => Start::Probe,
        1 => Start::Like(Step::Discover {
            revision: input.pick(&Revision::ALL),
        }),
        _ => Start::Like(Step::Initialize {
            revision: input.pick(&Revision::ALL),
        }),
    };
    let bound = match start {
        Start::Like(Step::Discover { revision }) if revision.era() == Era::Legacy => 5,
        _ => 4,
    };
    let mut n = Negotiation::new(start);
    let first = n.step();
    match start {
        Start::Like(step) => assert_eq!(first, step),
        _ => assert_eq!(
            first,
            Step::Discover {
                revision: Revision::LATEST
            }
        ),
    }
    let mut sent = vec![first];
    let mut replies = Vec::new();
    let mut asked_again = false;
    loop {
        let step = n.step();
        assert_eq!(
            Some(&step),
            sent.last(),
            "the step is the request last sent"
        );
        let reply = reply(&mut input);
        replies.push(reply.clone());
        match n.on_reply(reply.clone()) {
            Progress::Send(next) => {
                assert_eq!(n.step(), next);
                if sent.contains(&next) {
                    let named = matches!(&reply, Reply::RpcError(e) if e.code == -32022);
                    assert!(
                        named && !asked_again && matches!(step, Step::Discover { .. }),
                        "{next:?} sent again after {sent:?}, on {reply:?}"
                    );
                    asked_again = true;
                }
                match next {
                    Step::Discover { revision } => assert_eq!(revision.era(), Era::Modern),
                    Step::Initialize { revision } => assert_eq!(revision.era(), Era::Legacy),
                    _ => {}
                }
                sent.push(next);
                assert!(sent.len() <= bound, "{sent:?} from {start:?}");
            }
            Progress::Connected(c) => {
                assert_eq!(c.reached_by, step);
                match (step, &reply) {
                    (Step::Discover { .. }, Reply::Discovered(d)) => {
                        assert_eq!(c.revision.era(), Era::Modern);
                        assert_eq!(
                            Some(c.revision),
                            Revision::newest_known(&d.supported_versions)
                        );
                    }
                    (Step::Initialize { .. }, Reply::Initialized(i)) => {
                        assert_eq!(c.revision.era(), Era::Legacy);
                        assert_eq!(c.revision.as_str(), i.protocol_version);
                    }
                    _ => panic!("{step:?} connected by {reply:?}"),
                }
                return;
            }
            Progress::Failed(f) => {
                assert_eq!(f.refusals.len(), replies.len(), "one refusal per reply");
                for ((refusal, step), reply) in f.refusals.iter().zip(&sent).zip(&replies) {
                    assert_eq!(refusal.step, *step);
                    assert_eq!(refusal.reply, *reply);
                }
                let text = f.to_string();
                for refusal in &f.refusals {
                    let named = format!("{} refused: ", refusal.step.method());
                    assert!(text.contains(&named), "{text}");
                }
                return;
            }
            other => panic!("{other:?}"),
        }
    }
}
