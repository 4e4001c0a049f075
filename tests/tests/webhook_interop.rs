//! The Standard Webhooks signatures of `mcp-events` against the Python `standardwebhooks`
//! library (1.1.0, pinned in the peers' venv): it signs and we verify, we sign and it
//! verifies, a rotation header with several signatures passes both, and a tampered body
//! fails both.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use agentd_tests::peers;
use mcp_events::Limits;
use mcp_events::webhook::{Headers, Secret, verify};
use serde_json::{Value, json};

/// Runs `script` in the peers' Python with `input` as JSON on stdin; its stdout as JSON.
fn python(script: &str, input: &Value) -> Value {
    let mut child = Command::new(peers::python_exe())
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON from python")
}

const SIGN: &str = r#"
import json, sys
from datetime import datetime, timezone
from standardwebhooks import Webhook
cases = json.load(sys.stdin)
out = []
for c in cases:
    ts = datetime.fromtimestamp(c["timestamp"], tz=timezone.utc)
    out.append(Webhook(c["secret"]).sign(c["id"], ts, c["body"]))
print(json.dumps(out))
"#;

const VERIFY: &str = r#"
import json, sys
from standardwebhooks import Webhook
cases = json.load(sys.stdin)
out = []
for c in cases:
    try:
        Webhook(c["secret"]).verify(c["body"], c["headers"], json_parse=False)
        out.append("ok")
    except Exception as e:
        out.append(type(e).__name__ + ": " + str(e))
print(json.dumps(out))
"#;

fn now() -> i64 {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    i64::try_from(secs).unwrap()
}

/// Bodies with what a careless signer gets wrong: non-ASCII text, escapes, nested JSON,
/// whitespace, and one near 64 KiB.
fn bodies() -> Vec<String> {
    vec![
        r#"{"eventId":"e1","name":"ticket.created","timestamp":"2026-11-30T06:00:00Z","data":{"id":7}}"#.to_owned(),
        r#"{"type":"gap","cursor":"c9"}"#.to_owned(),
        "{\"data\": {\"title\": \"caf\u{e9} \u{1f600} \\\"quoted\\\" \\u0000\"}}\n".to_owned(),
        format!(r#"{{"data":{{"blob":"{}"}}}}"#, "x".repeat(65_000)),
    ]
}

#[test]
fn python_signs_and_agentd_verifies() {
    let ts = now();
    let limits = Limits::default();
    let secrets: Vec<Secret> = (0..4).map(|_| Secret::random().unwrap()).collect();
    let cases: Vec<Value> = bodies()
        .iter()
        .zip(&secrets)
        .enumerate()
        .map(|(i, (body, secret))| {
            json!({"secret": secret.as_str(), "id": format!("msg_{i}"), "timestamp": ts, "body": body})
        })
        .collect();
    let signatures = python(SIGN, &Value::Array(cases));
    for (i, (body, secret)) in bodies().iter().zip(&secrets).enumerate() {
        let signature = signatures[i].as_str().unwrap();
        let id = format!("msg_{i}");
        let timestamp = ts.to_string();
        let headers = Headers {
            id: &id,
            timestamp: &timestamp,
            signature,
            subscription: "sub_1",
        };
        assert_eq!(signature, secret.sign(&id, ts, body.as_bytes()), "case {i}");
        assert_eq!(
            verify(&headers, body.as_bytes(), &[secret], ts, &limits),
            Ok(()),
            "case {i}"
        );
        let mut tampered = body.clone().into_bytes();
        tampered[1] ^= 1;
        assert!(
            verify(&headers, &tampered, &[secret], ts, &limits).is_err(),
            "case {i}"
        );
    }
}

#[test]
fn agentd_signs_and_python_verifies() {
    let (old, new) = (Secret::random().unwrap(), Secret::random().unwrap());
    let ts = now();
    let mut cases = Vec::new();
    let mut expected = Vec::new();
    for (i, body) in bodies().into_iter().enumerate() {
        let id = format!("evt_{i}");
        let signature = new.sign(&id, ts, body.as_bytes());
        let headers = |signature: &str| json!({"webhook-id": id, "webhook-timestamp": ts.to_string(), "webhook-signature": signature});
        // One signature; then a rotation header that also carries an unknown version.
        cases.push(json!({"secret": new.as_str(), "body": body, "headers": headers(&signature)}));
        expected.push(true);
        let rotation = format!(
            "v1a,AAAA {} {signature}",
            old.sign(&id, ts, body.as_bytes())
        );
        cases.push(json!({"secret": new.as_str(), "body": body, "headers": headers(&rotation)}));
        expected.push(true);
        cases.push(json!({"secret": old.as_str(), "body": body, "headers": headers(&rotation)}));
        expected.push(true);
        // Under a secret that signed nothing, and over another body: refused.
        let other = Secret::random().unwrap();
        cases.push(json!({"secret": other.as_str(), "body": body, "headers": headers(&signature)}));
        expected.push(false);
        let tampered = body.replacen('{', "{ ", 1);
        cases.push(
            json!({"secret": new.as_str(), "body": tampered, "headers": headers(&signature)}),
        );
        expected.push(false);
    }
    let verdicts = python(VERIFY, &Value::Array(cases.clone()));
    for (i, (verdict, ok)) in verdicts
        .as_array()
        .unwrap()
        .iter()
        .zip(&expected)
        .enumerate()
    {
        assert_eq!(
            verdict == "ok",
            *ok,
            "case {i}: {verdict} for {}",
            cases[i]["headers"]
        );
        // And ours says the same of every case.
        let headers = &cases[i]["headers"];
        let theirs = Headers {
            id: headers["webhook-id"].as_str().unwrap(),
            timestamp: headers["webhook-timestamp"].as_str().unwrap(),
            signature: headers["webhook-signature"].as_str().unwrap(),
            subscription: "sub_1",
        };
        let secret = Secret::parse(cases[i]["secret"].as_str().unwrap()).unwrap();
        let body = cases[i]["body"].as_str().unwrap();
        assert_eq!(
            verify(&theirs, body.as_bytes(), &[&secret], ts, &Limits::default()).is_ok(),
            *ok,
            "case {i}"
        );
    }
}
