//! MCP protocol revisions.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An MCP protocol revision this crate knows, ordered oldest first.
///
/// The revisions up to 2025-11-25 open a connection with `initialize` (the legacy era); from
/// 2026-07-28 on, every request carries its revision in `_meta` and a client probes with
/// `server/discover` (the modern era).
///
/// ```
/// use mcp_wire::{Era, Revision};
///
/// let r: Revision = "2025-11-25".parse().unwrap();
/// assert_eq!(r.era(), Era::Legacy);
/// assert!(Revision::V2026_07_28 > r);
/// assert_eq!(Revision::LATEST.to_string(), "2026-07-28");
/// assert_eq!(
///     Revision::newest_known(["1999-01-01", "2025-03-26", "2024-11-05"]),
///     Some(Revision::V2025_03_26),
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Revision {
    /// `2024-11-05`: the HTTP+SSE revision.
    V2024_11_05,
    /// `2025-03-26`: Streamable HTTP introduced.
    V2025_03_26,
    /// `2025-06-18`: batching removed, `MCP-Protocol-Version` header added.
    V2025_06_18,
    /// `2025-11-25`: the last revision with `initialize` and sessions.
    V2025_11_25,
    /// `2026-07-28`: stateless; `server/discover`, per-request `_meta`, `subscriptions/listen`.
    V2026_07_28,
}

/// The two eras of MCP revisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Era {
    /// `initialize` handshake and HTTP sessions (2025-11-25 and older).
    Legacy,
    /// Stateless requests that carry their revision (2026-07-28 and newer).
    Modern,
}

impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Legacy => "legacy",
            Self::Modern => "modern",
        })
    }
}

impl Revision {
    /// Every known revision, oldest first.
    pub const ALL: [Self; 5] = [
        Self::V2024_11_05,
        Self::V2025_03_26,
        Self::V2025_06_18,
        Self::V2025_11_25,
        Self::V2026_07_28,
    ];

    /// The newest revision this crate knows.
    pub const LATEST: Self = Self::V2026_07_28;

    /// The newest legacy (handshake) revision, the fallback of negotiation.
    pub const LATEST_LEGACY: Self = Self::V2025_11_25;

    /// The revision as it appears on the wire, e.g. `"2025-11-25"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::V2024_11_05 => "2024-11-05",
            Self::V2025_03_26 => "2025-03-26",
            Self::V2025_06_18 => "2025-06-18",
            Self::V2025_11_25 => "2025-11-25",
            Self::V2026_07_28 => "2026-07-28",
        }
    }

    /// Which era the revision belongs to.
    pub const fn era(self) -> Era {
        match self {
            Self::V2026_07_28 => Era::Modern,
            _ => Era::Legacy,
        }
    }

    /// The newest revision among `versions` that this crate knows, ignoring unknown strings.
    pub fn newest_known<I, S>(versions: I) -> Option<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        versions
            .into_iter()
            .filter_map(|v| v.as_ref().parse().ok())
            .max()
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Revision {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| crate::Error::UnknownRevision(s.to_owned()))
    }
}

impl Serialize for Revision {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Revision {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
