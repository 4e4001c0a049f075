//! The timestamps MCP Events carries (`timestamp`, `refreshBefore`): RFC 3339, read into Unix
//! milliseconds by the `time` crate.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Reads an RFC 3339 date-time (`2026-11-30T06:00:00Z`, `…T06:00:00.250+01:00`) as Unix
/// milliseconds; `None` when it is not one.
///
/// ```
/// use mcp_events::time::unix_millis;
///
/// assert_eq!(unix_millis("1970-01-01T00:00:01.5Z"), Some(1500));
/// assert_eq!(unix_millis("2026-11-30T07:00:00+01:00"), unix_millis("2026-11-30T06:00:00Z"));
/// assert_eq!(unix_millis("2026-02-30T00:00:00Z"), None);
/// ```
pub fn unix_millis(text: &str) -> Option<i64> {
    // RFC 3339's date and time are joined by `T` (or `t`); the parser takes any byte there.
    if !matches!(text.as_bytes().get(10), Some(b'T' | b't')) {
        return None;
    }
    let at = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    i64::try_from(at.unix_timestamp_nanos().div_euclid(1_000_000)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_servers_send() {
        assert_eq!(unix_millis("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(unix_millis("2026-10-05T12:00:00Z"), Some(1_791_201_600_000));
        assert_eq!(
            unix_millis("2026-10-05T12:00:00.123456Z"),
            Some(1_791_201_600_123)
        );
        assert_eq!(
            unix_millis("2026-10-05T14:30:00+02:30"),
            Some(1_791_201_600_000)
        );
        assert_eq!(unix_millis("2024-02-29T00:00:00z"), Some(1_709_164_800_000));
        assert_eq!(unix_millis("1969-12-31T23:59:59Z"), Some(-1000));
    }

    #[test]
    fn refuses_what_is_not_rfc_3339() {
        for bad in [
            "",
            "2026-10-05",
            "2026-10-05T12:00:00",
            "2026-10-05T12:00:00.Z",
            "2026-13-05T12:00:00Z",
            "2025-02-29T12:00:00Z",
            "2026-10-05T24:00:00Z",
            "2026-10-05T12:00:00+2:00",
            "2026-10-05T12:00:00+24:00",
            "2026-1a-05T12:00:00Z",
            "2026-10-05X12:00:00Z",
            "2026-10-05T12:00:00Zjunk",
            "+026-10-05T12:00:00Z",
            "2026-10-05 12:00:00Z",
            "2026-10-05T12:00:60Z",
        ] {
            assert_eq!(unix_millis(bad), None, "{bad:?}");
        }
    }
}
