//! Standard Webhooks vectors signed by another implementation (the Python `standardwebhooks`
//! library; the first is the Standard Webhooks specification's own example): we sign the
//! same, and verify them.

use mcp_events::Limits;
use mcp_events::webhook::{Headers, Secret, verify};
use serde_json::Value;

#[test]
fn signatures_match_the_vectors() {
    let text = include_str!("fixtures/standard-webhooks-vectors.json");
    let fixture: Value = serde_json::from_str(text).unwrap();
    let vectors = fixture["vectors"].as_array().unwrap();
    assert_eq!(vectors.len(), 3);
    let limits = Limits::default();
    for v in vectors {
        let field = |name: &str| v[name].as_str().unwrap();
        let secret = Secret::parse(field("secret")).unwrap();
        let timestamp: i64 = field("webhook-timestamp").parse().unwrap();
        let body = field("body").as_bytes();
        assert_eq!(
            secret.sign(field("webhook-id"), timestamp, body),
            field("webhook-signature")
        );
        let headers = Headers {
            id: field("webhook-id"),
            timestamp: field("webhook-timestamp"),
            signature: field("webhook-signature"),
            subscription: "sub",
        };
        assert_eq!(
            verify(&headers, body, &[&secret], timestamp, &limits),
            Ok(())
        );
        let mut tampered = body.to_vec();
        tampered.push(b' ');
        assert!(verify(&headers, &tampered, &[&secret], timestamp, &limits).is_err());
    }
}
