//! The Standard Webhooks profile of MCP Events deliveries: the signing secret a client makes
//! for each subscription, and the check every delivery passes before its body is used.
//!
//! A delivery carries four headers: `webhook-id`, `webhook-timestamp` (Unix seconds),
//! `webhook-signature` (space-separated `v1,<base64>` signatures; other versions are passed
//! over) and `X-MCP-Subscription-Id`. A `v1` signature is the base64 of
//! HMAC-SHA256(secret, `id.timestamp.body`) over the raw body. The delivery passes when its
//! timestamp is within [`Limits::webhook_tolerance`] of now (5 minutes by default) and any
//! `v1` signature matches under any current secret (several, while a secret is rotated).
//!
//! ```
//! use mcp_events::Limits;
//! use mcp_events::webhook::{Headers, Secret, verify};
//!
//! let secret = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
//! let body = br#"{"type":"gap","cursor":"c9"}"#;
//! let signature = secret.sign("msg_1", 1_700_000_000, body);
//! let headers = Headers {
//!     id: "msg_1",
//!     timestamp: "1700000000",
//!     signature: &signature,
//!     subscription: "sub_1",
//! };
//! let limits = Limits::default();
//! assert!(verify(&headers, body, &[&secret], 1_700_000_060, &limits).is_ok());
//! assert!(verify(&headers, b"{}", &[&secret], 1_700_000_060, &limits).is_err());
//! ```

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::{Error, Limits};

/// The prefix of a secret's text.
pub const SECRET_PREFIX: &str = "whsec_";
/// The bytes of a secret [`Secret::random`] makes.
pub const SECRET_BYTES: usize = 32;
/// The header naming the delivery (an `eventId`, or `msg_…` for a control envelope).
pub const ID: &str = "webhook-id";
/// The header with the delivery's Unix time in seconds.
pub const TIMESTAMP: &str = "webhook-timestamp";
/// The header with the signatures.
pub const SIGNATURE: &str = "webhook-signature";
/// The header naming the subscription.
pub const SUBSCRIPTION: &str = mcp_wire::events::SUBSCRIPTION_HEADER;

/// A subscription's signing secret: `whsec_` and the base64 of 24 to 64 bytes.
///
/// Its `Debug` does not show it.
#[derive(Clone)]
pub struct Secret {
    /// HMAC-SHA256 keyed with the secret, before any input.
    key: Hmac<Sha256>,
    text: String,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(whsec_…)")
    }
}

impl Secret {
    /// A fresh secret of [`SECRET_BYTES`] drawn from the operating system's CSPRNG. A caller
    /// with a generator of its own draws the bytes and takes [`Secret::from_bytes`].
    pub fn random() -> Result<Self, Error> {
        let mut bytes = [0u8; SECRET_BYTES];
        getrandom::fill(&mut bytes).map_err(|_| Error::NoRandomness)?;
        Ok(Self::of(&bytes))
    }

    /// The secret of `bytes` (24 to 64 of them).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        if !(24..=64).contains(&bytes.len()) {
            return Err(Error::BadSecret);
        }
        Ok(Self::of(bytes))
    }

    /// The secret of `bytes`, of a length checked already.
    fn of(bytes: &[u8]) -> Self {
        let mut text = String::with_capacity(SECRET_PREFIX.len() + bytes.len().div_ceil(3) * 4);
        text.push_str(SECRET_PREFIX);
        STANDARD.encode_string(bytes, &mut text);
        let key = Hmac::new_from_slice(bytes).expect("HMAC takes a key of any length");
        Self { key, text }
    }

    /// Reads a secret's text.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let bytes = text
            .strip_prefix(SECRET_PREFIX)
            .and_then(|b64| STANDARD.decode(b64).ok())
            .ok_or(Error::BadSecret)?;
        Self::from_bytes(&bytes)
    }

    /// Its text, as sent in `events/subscribe` and kept in the store.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The `v1` signature of a delivery, as a `webhook-signature` value (what a server
    /// sends).
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let tag = self.mac(id, &timestamp.to_string(), body).finalize();
        let mut out = String::from("v1,");
        STANDARD.encode_string(tag.into_bytes(), &mut out);
        out
    }

    /// The HMAC of `id.timestamp.body`, not finalized.
    fn mac(&self, id: &str, timestamp: &str, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = self.key.clone();
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }
}

/// The four headers of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headers<'a> {
    /// `webhook-id`.
    pub id: &'a str,
    /// `webhook-timestamp`.
    pub timestamp: &'a str,
    /// `webhook-signature`.
    pub signature: &'a str,
    /// `X-MCP-Subscription-Id`.
    pub subscription: &'a str,
}

impl<'a> Headers<'a> {
    /// Reads the four headers with `get` (a case-insensitive lookup, as HTTP header maps
    /// are); a missing one is refused.
    pub fn read(get: impl Fn(&str) -> Option<&'a str>) -> Result<Self, Error> {
        let need = |name: &'static str| get(name).ok_or(Error::MissingHeader { name });
        Ok(Self {
            id: need(ID)?,
            timestamp: need(TIMESTAMP)?,
            signature: need(SIGNATURE)?,
            subscription: need(SUBSCRIPTION)?,
        })
    }
}

/// Checks a delivery: its timestamp within [`Limits::webhook_tolerance`] of `now` (Unix
/// seconds), and a `v1` signature that is the HMAC of `body` under one of `secrets`,
/// compared in constant time.
pub fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    secrets: &[&Secret],
    now: i64,
    limits: &Limits,
) -> Result<(), Error> {
    let sent: i64 = match headers.timestamp.as_bytes() {
        [b'1'..=b'9', rest @ ..] if rest.len() < 18 && rest.iter().all(u8::is_ascii_digit) => {
            headers.timestamp.parse().map_err(|_| Error::BadTimestamp)?
        }
        _ => return Err(Error::BadTimestamp),
    };
    let age_secs = now.saturating_sub(sent);
    if age_secs.unsigned_abs() > limits.webhook_tolerance.as_secs() {
        return Err(Error::Stale { age_secs });
    }
    // The body is hashed once per secret; each signature is checked against a copy.
    let macs: Vec<Hmac<Sha256>> = secrets
        .iter()
        .map(|s| s.mac(headers.id, headers.timestamp, body))
        .collect();
    let mut given = [0u8; 64];
    let matches = headers
        .signature
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .any(|s| {
            // A signature that does not decode, or decodes past 64 bytes, matches nothing.
            let Ok(n) = STANDARD.decode_slice(s, &mut given) else {
                return false;
            };
            macs.iter()
                .any(|mac| mac.clone().verify_slice(&given[..n]).is_ok())
        });
    match matches {
        true => Ok(()),
        false => Err(Error::BadSignature),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_764_482_400;

    fn secret(fill: u8) -> Secret {
        Secret::from_bytes(&[fill; 32]).unwrap()
    }

    fn headers<'a>(signature: &'a str, timestamp: &'a str) -> Headers<'a> {
        Headers {
            id: "evt_1",
            timestamp,
            signature,
            subscription: "sub_1",
        }
    }

    #[test]
    fn a_signed_delivery_passes_and_any_change_fails() {
        let l = Limits::default();
        let s = secret(7);
        let body = br#"{"eventId":"evt_1"}"#;
        let sig = s.sign("evt_1", NOW, body);
        let ts = NOW.to_string();
        assert_eq!(verify(&headers(&sig, &ts), body, &[&s], NOW, &l), Ok(()));
        let wrong = [
            verify(
                &headers(&sig, &ts),
                br#"{"eventId":"evt_2"}"#,
                &[&s],
                NOW,
                &l,
            ),
            verify(&headers(&sig, &ts), body, &[&secret(8)], NOW, &l),
            verify(
                &Headers {
                    id: "evt_2",
                    ..headers(&sig, &ts)
                },
                body,
                &[&s],
                NOW,
                &l,
            ),
            verify(&headers(&sig, &(NOW + 1).to_string()), body, &[&s], NOW, &l),
            verify(
                &headers(&sig.replace("v1,", "v2,"), &ts),
                body,
                &[&s],
                NOW,
                &l,
            ),
            verify(&headers(&sig, &ts), body, &[], NOW, &l),
        ];
        for outcome in wrong {
            assert_eq!(outcome, Err(Error::BadSignature));
        }
    }

    #[test]
    fn any_signature_under_any_secret_passes_during_a_rotation() {
        let l = Limits::default();
        let (old, new) = (secret(1), secret(2));
        let body = b"{}";
        let both = format!(
            "v1a,c2lnbmF0dXJl {} v1,!!! {}",
            old.sign("evt_1", NOW, body),
            new.sign("evt_1", NOW, body)
        );
        let ts = NOW.to_string();
        assert_eq!(verify(&headers(&both, &ts), body, &[&new], NOW, &l), Ok(()));
        assert_eq!(verify(&headers(&both, &ts), body, &[&old], NOW, &l), Ok(()));
        let only_old = old.sign("evt_1", NOW, body);
        assert_eq!(
            verify(&headers(&only_old, &ts), body, &[&new, &old], NOW, &l),
            Ok(())
        );
    }

    #[test]
    fn the_timestamp_is_within_five_minutes_either_way() {
        let l = Limits::default();
        let s = secret(3);
        let at = |sent: i64, now: i64| {
            let sig = s.sign("evt_1", sent, b"{}");
            verify(&headers(&sig, &sent.to_string()), b"{}", &[&s], now, &l)
        };
        assert_eq!(at(NOW, NOW + 300), Ok(()));
        assert_eq!(at(NOW, NOW + 301), Err(Error::Stale { age_secs: 301 }));
        assert_eq!(at(NOW, NOW - 300), Ok(()));
        assert_eq!(at(NOW, NOW - 301), Err(Error::Stale { age_secs: -301 }));
        let narrow = Limits {
            webhook_tolerance: std::time::Duration::from_secs(10),
            ..Limits::default()
        };
        let sig = s.sign("evt_1", NOW, b"{}");
        let within =
            |now: i64| verify(&headers(&sig, &NOW.to_string()), b"{}", &[&s], now, &narrow);
        assert_eq!(within(NOW + 10), Ok(()));
        assert_eq!(within(NOW + 11), Err(Error::Stale { age_secs: 11 }));
        let sig = s.sign("evt_1", NOW, b"{}");
        for bad in [
            "",
            "-1",
            "+1764482400",
            "1764482400.0",
            " 1764482400",
            "01764482400",
        ] {
            assert_eq!(
                verify(&headers(&sig, bad), b"{}", &[&s], NOW, &l),
                Err(Error::BadTimestamp),
                "{bad:?}"
            );
        }
        assert_eq!(
            verify(
                &headers(&sig, "99999999999999999999"),
                b"{}",
                &[&s],
                NOW,
                &l
            ),
            Err(Error::BadTimestamp)
        );
    }

    #[test]
    fn secrets_are_whsec_and_24_to_64_bytes() {
        assert_eq!(Secret::from_bytes(&[0; 23]).err(), Some(Error::BadSecret));
        assert!(Secret::from_bytes(&[0; 24]).is_ok());
        assert!(Secret::from_bytes(&[0; 64]).is_ok());
        assert_eq!(Secret::from_bytes(&[0; 65]).err(), Some(Error::BadSecret));
        let s = Secret::random().unwrap();
        assert_eq!(s.as_str().len(), "whsec_".len() + 44);
        assert!(s.as_str().starts_with("whsec_"));
        assert_eq!(Secret::parse(s.as_str()).unwrap().as_str(), s.as_str());
        for bad in [
            "",
            "whsec_",
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "whsec_!!!!",
        ] {
            assert_eq!(Secret::parse(bad).err(), Some(Error::BadSecret), "{bad:?}");
        }
        assert_eq!(format!("{s:?}"), "Secret(whsec_…)");
    }

    #[test]
    fn all_four_headers_are_needed() {
        let all = [
            (ID, "a"),
            (TIMESTAMP, "1"),
            (SIGNATURE, "v1,x"),
            (SUBSCRIPTION, "s"),
        ];
        for missing in 0..all.len() {
            let get = |name: &str| {
                all.iter()
                    .enumerate()
                    .find(|(i, (n, _))| *i != missing && n.eq_ignore_ascii_case(name))
                    .map(|(_, (_, v))| *v)
            };
            assert_eq!(
                Headers::read(get),
                Err(Error::MissingHeader {
                    name: all[missing].0
                })
            );
        }
    }
}
