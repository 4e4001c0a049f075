//! The bounds and schedules of MCP Events, as one value the client chooses.

use std::time::Duration;

/// Every bound and schedule the machines of this crate keep: the occurrence checks
/// ([`occurrence::check`](crate::occurrence::check)), the dedup window ([`Dedup`](crate::Dedup)),
/// the listing pager ([`Lister`](crate::listing::Lister)), a binding's polls, lease and retries
/// ([`binding::Config::limits`](crate::binding::Config::limits)), and the webhook check
/// ([`webhook::verify`](crate::webhook::verify)).
///
/// [`Limits::default`] holds the value each field names; change a field of it to choose
/// another. A duration past what a clock reading can be moved by (about 136 years) is taken
/// as that much: no value panics a machine.
///
/// ```
/// use std::time::Duration;
/// use mcp_events::Limits;
///
/// let mut limits = Limits::default();
/// limits.occurrence_max = 64 * 1024;
/// limits.dedup_window = Duration::from_secs(10 * 60);
/// assert_eq!(limits.dedup_ids, 4096);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// One occurrence, as its JSON re-encoded, or one webhook body, in bytes. Default:
    /// 256 KiB.
    pub occurrence_max: usize,
    /// An `eventId`, in bytes. Default: 1 KiB.
    pub event_id_max: usize,
    /// A cursor that is stored, in bytes (a longer one is not kept). Default: 4 KiB.
    pub cursor_max: usize,
    /// Duplicate detection: an `eventId` is a duplicate when seen this recently. Default:
    /// 35 minutes.
    pub dedup_window: Duration,
    /// Duplicate detection: at most this many ids per binding (the oldest is let go).
    /// Default: 4096.
    pub dedup_ids: usize,
    /// Listing: at most this many pages of `events/list`. Default: 20.
    pub list_pages_max: usize,
    /// Listing: at most this many event types. Default: 1000.
    pub list_types_max: usize,
    /// A server's event types are listed again this long after a whole listing. Default:
    /// 15 minutes.
    pub relist_every: Duration,
    /// `maxEvents` of each `events/poll`. Default: 50.
    pub poll_max_events: u32,
    /// Polls at once in a row while the server says `hasMore` and each page held something
    /// new. Default: 10.
    pub poll_burst_max: u32,
    /// The shortest wait between polls. Default: 1 s.
    pub poll_min: Duration,
    /// The wait between polls when the server names none. Default: 30 s.
    pub poll_default: Duration,
    /// The longest wait between polls. Default: 15 minutes.
    pub poll_max: Duration,
    /// The webhook lease asked for (`ttlMs`). Default: 1 h.
    pub lease: Duration,
    /// A lease is refreshed when this share (percent) of what the server granted has passed.
    /// Default: 80.
    pub lease_refresh_percent: u32,
    /// A webhook refusal that may pass, still outstanding after this, pauses the binding.
    /// Default: 5 minutes.
    pub refusal_pause_after: Duration,
    /// `callback_failed` this many times in a row moves a binding to its next mode.
    /// Default: 5.
    pub callback_failures_max: u32,
    /// A webhook delivery's `webhook-timestamp` may be this far from now, either way.
    /// Default: 5 minutes.
    pub webhook_tolerance: Duration,
    /// A failed `events/*` request is asked again this long after the first failure, the
    /// wait doubling after each. Default: 1 s.
    pub retry_first: Duration,
    /// …up to this. Default: 5 minutes.
    pub retry_max: Duration,
    /// …or, while the server answers -32025 ResourceExhausted, up to this. Default:
    /// 15 minutes.
    pub retry_exhausted_max: Duration,
    /// Every wait of a schedule is moved by up to this share (percent) of itself, either
    /// way. Default: 10.
    pub jitter_percent: u32,
}

impl Default for Limits {
    /// The value each field names.
    fn default() -> Self {
        Self {
            occurrence_max: 256 * 1024,
            event_id_max: 1024,
            cursor_max: 4 * 1024,
            dedup_window: Duration::from_secs(35 * 60),
            dedup_ids: 4096,
            list_pages_max: 20,
            list_types_max: 1000,
            relist_every: Duration::from_secs(15 * 60),
            poll_max_events: 50,
            poll_burst_max: 10,
            poll_min: Duration::from_secs(1),
            poll_default: Duration::from_secs(30),
            poll_max: Duration::from_secs(15 * 60),
            lease: Duration::from_secs(3600),
            lease_refresh_percent: 80,
            refusal_pause_after: Duration::from_secs(5 * 60),
            callback_failures_max: 5,
            webhook_tolerance: Duration::from_secs(5 * 60),
            retry_first: Duration::from_secs(1),
            retry_max: Duration::from_secs(5 * 60),
            retry_exhausted_max: Duration::from_secs(15 * 60),
            jitter_percent: 10,
        }
    }
}
