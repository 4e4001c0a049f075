//! `[security.exec]`: whether `exec` runs commands on this host, and the runner's policy.
//!
//! ```toml
//! [security.exec]
//! enabled = true       # false when not set: exec is not offered
//! timeout = "60s"      # a call that names no timeout
//! timeout_max = "10m"  # the longest a call may name; past it the call is refused
//! output_max = 32768   # bytes kept of each of stdout and stderr (at most 64 KiB)
//! file_max = 16777216  # the largest file a command may write (at most 1 GiB)
//! concurrency = 4      # calls running at once; one past it is refused (at most 64)
//! path = "/usr/local/bin:/usr/bin:/bin"  # where a program without a slash is looked for
//! ```
//!
//! `enabled = true` in an agentd built without the `exec` feature is refused at load, naming
//! the feature: a configuration that asks for commands never runs quietly without them.

use std::path::Path;
use std::time::Duration;

use toml::Spanned;

use super::file::SecurityFile;
use super::{At, ConfigError};

/// `security.exec.timeout` when the file says nothing.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(60);
/// `security.exec.timeout_max` when the file says nothing.
pub(crate) const TIMEOUT_MAX: Duration = Duration::from_secs(600);
/// `security.exec.output_max` when the file says nothing: 32 KiB a stream, the two within
/// the answer's bound.
pub(crate) const OUTPUT_MAX: usize = 32 * 1024;
/// The most `security.exec.output_max` may be: the answer's bound
/// ([`agentd_tools::exec::ANSWER_MAX`], 64 KiB), past which nothing more would reach it.
pub(crate) const OUTPUT_LIMIT: usize = agentd_tools::exec::ANSWER_MAX;
/// `security.exec.file_max` when the file says nothing: 16 MiB.
pub(crate) const FILE_MAX: u64 = 16 * 1024 * 1024;
/// The most `security.exec.file_max` may be: 1 GiB.
pub(crate) const FILE_LIMIT: u64 = 1024 * 1024 * 1024;
/// `security.exec.concurrency` when the file says nothing.
pub(crate) const CONCURRENCY: usize = 4;
/// The most `security.exec.concurrency` may be.
pub(crate) const CONCURRENCY_LIMIT: usize = 64;
/// `security.exec.path` when the file says nothing.
pub(crate) const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The policy of the local command runner (`[security.exec]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exec {
    /// How long a call that names no timeout may run (`timeout`, [`TIMEOUT`]).
    pub(crate) timeout: Duration,
    /// The longest timeout a call may name (`timeout_max`, [`TIMEOUT_MAX`]).
    pub(crate) timeout_max: Duration,
    /// The bytes kept of each of a command's stdout and stderr (`output_max`,
    /// [`OUTPUT_MAX`]).
    pub(crate) output_max: usize,
    /// The largest file a command may write, in bytes (`file_max`, [`FILE_MAX`]): its
    /// `RLIMIT_FSIZE`, soft and hard. A write past it ends the command with `SIGXFSZ`, or
    /// fails with `EFBIG` when the command ignores that signal.
    pub(crate) file_max: u64,
    /// The most calls running at once (`concurrency`, [`CONCURRENCY`]); one past it is
    /// refused.
    pub(crate) concurrency: usize,
    /// The command's `PATH`: absolute folders split by `:`, where a program named without a
    /// slash is looked for, in order (`path`, [`PATH`]).
    pub(crate) path: String,
}

impl Default for Exec {
    fn default() -> Self {
        Self {
            timeout: TIMEOUT,
            timeout_max: TIMEOUT_MAX,
            output_max: OUTPUT_MAX,
            file_max: FILE_MAX,
            concurrency: CONCURRENCY,
            path: PATH.to_owned(),
        }
    }
}

/// Reads a duration of the file: its default when not given.
pub(super) type ReadDuration<'a> =
    dyn Fn(&Option<Spanned<String>>, &str, Duration) -> Result<Duration, ConfigError> + 'a;

/// Checks `[security]`: the runner's policy when `security.exec.enabled` is true.
pub(super) fn exec(
    raw: &SecurityFile,
    duration: &ReadDuration<'_>,
    at: &At<'_>,
) -> Result<Option<Exec>, ConfigError> {
    let Some(e) = &raw.exec else {
        return Ok(None);
    };
    let mut policy = Exec {
        timeout: duration(&e.timeout, "security.exec.timeout", TIMEOUT)?,
        timeout_max: duration(&e.timeout_max, "security.exec.timeout_max", TIMEOUT_MAX)?,
        ..Exec::default()
    };
    if policy.timeout > policy.timeout_max {
        let span = e
            .timeout
            .as_ref()
            .or(e.timeout_max.as_ref())
            .map(Spanned::span);
        let message = "is past security.exec.timeout_max".to_owned();
        return Err(at(span, "security.exec.timeout", message));
    }
    if let Some(max) = &e.output_max {
        policy.output_max = match usize::try_from(*max.get_ref()) {
            Ok(bytes @ 1..=OUTPUT_LIMIT) => bytes,
            _ => {
                let message = format!("must be 1 to {OUTPUT_LIMIT} bytes");
                return Err(at(Some(max.span()), "security.exec.output_max", message));
            }
        };
    }
    if let Some(max) = &e.file_max {
        policy.file_max = match *max.get_ref() {
            bytes @ 1..=FILE_LIMIT => bytes,
            _ => {
                let message = format!("must be 1 to {FILE_LIMIT} bytes");
                return Err(at(Some(max.span()), "security.exec.file_max", message));
            }
        };
    }
    if let Some(n) = &e.concurrency {
        policy.concurrency = match usize::try_from(*n.get_ref()) {
            Ok(n @ 1..=CONCURRENCY_LIMIT) => n,
            _ => {
                let message = format!("must be 1 to {CONCURRENCY_LIMIT}");
                return Err(at(Some(n.span()), "security.exec.concurrency", message));
            }
        };
    }
    if let Some(path) = &e.path {
        if !is_path(path.get_ref()) {
            let message = "is not absolute folders split by \":\"".to_owned();
            return Err(at(Some(path.span()), "security.exec.path", message));
        }
        path.get_ref().clone_into(&mut policy.path);
    }
    match &e.enabled {
        Some(on) if *on.get_ref() && !cfg!(feature = "exec") => Err(at(
            Some(on.span()),
            "security.exec.enabled",
            "this agentd is built without the exec feature, so it runs no commands: build it \
             with `--features exec`, or set enabled = false"
                .to_owned(),
        )),
        Some(on) if *on.get_ref() => Ok(Some(policy)),
        _ => Ok(None),
    }
}

/// Whether `path` is one or more absolute folders split by `:`, without a NUL byte.
fn is_path(path: &str) -> bool {
    !path.contains('\0') && path.split(':').all(|f| Path::new(f).is_absolute())
}
