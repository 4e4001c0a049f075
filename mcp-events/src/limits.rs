//! Every bound and schedule the reference names for MCP Events, in one place.

use std::time::Duration;

/// Bindings per server.
pub const BINDINGS_PER_SERVER: usize = 64;
/// Bindings and subscriptions per instance.
pub const BINDINGS_PER_INSTANCE: usize = 256;
/// Live runtime subscriptions a grant allows: at most this.
pub const GRANT_MAX: u32 = 64;
/// Live runtime subscriptions a grant allows when it says nothing.
pub const GRANT_DEFAULT: u32 = 8;
/// A tool-made subscription's lifetime: at most this.
pub const LIFETIME_MAX: Duration = Duration::from_secs(30 * 24 * 3600);
/// A tool-made subscription's lifetime when it says nothing.
pub const LIFETIME_DEFAULT: Duration = Duration::from_secs(24 * 3600);
/// Runtime subscription arguments, serialized.
pub const ARGUMENTS_MAX: usize = 4 * 1024;

/// One occurrence, or one webhook body (and at most `store.max_value_bytes`).
pub const OCCURRENCE_MAX: usize = 256 * 1024;
/// An `eventId`.
pub const EVENT_ID_MAX: usize = 1024;
/// A stored cursor.
pub const CURSOR_MAX: usize = 4 * 1024;

/// Duplicate detection: ids seen this recently.
pub const DEDUP_WINDOW: Duration = Duration::from_secs(35 * 60);
/// Duplicate detection: at most this many ids per binding.
pub const DEDUP_IDS: usize = 4096;

/// Listing: at most this many pages.
pub const LIST_PAGES_MAX: usize = 20;
/// Listing: at most this many types.
pub const LIST_TYPES_MAX: usize = 1000;
/// A server's event types are listed again this often.
pub const RELIST_EVERY: Duration = Duration::from_secs(15 * 60);

/// A poll asks for at most this many occurrences.
pub const POLL_MAX_EVENTS: u32 = 50;
/// Polls in a row while the server says `hasMore` and each page held something new.
pub const POLL_BURST_MAX: u32 = 10;
/// The shortest wait between polls.
pub const POLL_MIN: Duration = Duration::from_secs(1);
/// The wait between polls when the server names none.
pub const POLL_DEFAULT: Duration = Duration::from_secs(30);
/// The longest wait between polls.
pub const POLL_MAX: Duration = Duration::from_secs(15 * 60);

/// The webhook lease asked for.
pub const LEASE_DEFAULT: Duration = Duration::from_secs(3600);
/// A lease is refreshed when this share of what the server granted has passed (80%).
pub const LEASE_REFRESH_PERCENT: u32 = 80;
/// A webhook refusal still outstanding after this pauses the binding.
pub const REFUSAL_PAUSE_AFTER: Duration = Duration::from_secs(5 * 60);
/// `callback_failed` this many times in a row moves the binding to the next mode.
pub const CALLBACK_FAILURES_MAX: u32 = 5;
/// A webhook delivery's timestamp may be this far from now.
pub const WEBHOOK_TOLERANCE: Duration = Duration::from_secs(5 * 60);

/// A failed `events/*` request is retried this long after the first failure…
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
/// …doubling up to this…
pub const RETRY_MAX: Duration = Duration::from_secs(5 * 60);
/// …or, after -32025 ResourceExhausted, up to this.
pub const RETRY_EXHAUSTED_MAX: Duration = Duration::from_secs(15 * 60);
/// Every wait of a schedule is moved by up to this share of itself, either way (10%).
pub const JITTER_PERCENT: u32 = 10;

/// Each `events/*` request is bounded at this.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// `events/*` requests run on this many worker threads of their own.
pub const WORKER_THREADS: usize = 4;
