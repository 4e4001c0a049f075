//! Checks arbitrary deliveries: the four headers and the body from the fuzzer's bytes.
//! Oracles: nothing panics; a delivery that passes was signed with the secret over exactly
//! that id, timestamp and body (signing it again gives a signature the header holds); and a
//! delivery signed by the secret passes.

use mcp_events::Limits;
use mcp_events::webhook::{Headers, Secret, verify};

const NOW: i64 = 1_764_482_400;

/// The `webhook` target: see the module docs.
pub fn webhook(data: &[u8]) {
    let secret = Secret::from_bytes(&[42; 32]).expect("32 bytes");
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(4, '\n');
    let (Some(id), Some(timestamp), Some(signature)) = (parts.next(), parts.next(), parts.next())
    else {
        return;
    };
    let body = parts.next().unwrap_or("").as_bytes();
    let headers = Headers {
        id,
        timestamp,
        signature,
        subscription: "sub",
    };
    if verify(&headers, body, &[&secret], NOW, &Limits::default()).is_ok() {
        let sent: i64 = timestamp.parse().expect("a passing timestamp is a number");
        let again = secret.sign(id, sent, body);
        assert!(signature.split(' ').any(|s| s == again), "{signature:?}");
    }
    let signed = secret.sign(id, NOW, body);
    let now = NOW.to_string();
    let good = Headers {
        id,
        timestamp: &now,
        signature: &signed,
        subscription: "sub",
    };
    assert_eq!(
        verify(&good, body, &[&secret], NOW, &Limits::default()),
        Ok(())
    );
}
