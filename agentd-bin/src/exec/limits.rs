//! The resource limits a command starts under, set in the child between its fork and its
//! exec.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// What a command's limits are set to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Limits {
    /// The soft `RLIMIT_NOFILE` it is given back (the one the daemon started with, which
    /// the daemon raised for itself); `None`: it keeps the daemon's.
    pub(super) nofile: Option<u64>,
    /// `RLIMIT_FSIZE`, soft and hard: the largest file it may write (`file_max`), or the
    /// daemon's hard limit when that is lower.
    pub(super) file_max: u64,
}

impl Limits {
    /// Sets the limits in the child of `command`, before its program runs.
    #[expect(
        unsafe_code,
        reason = "pre_exec: the limits are the child's own, set between fork and exec"
    )]
    pub(super) fn apply(self, command: &mut tokio::process::Command) {
        // SAFETY: the closure runs in the forked child, before exec, where only
        // async-signal-safe calls may be made: it allocates nothing, takes no lock, and
        // calls only `getrlimit` and `setrlimit`, which are system calls.
        unsafe {
            command.pre_exec(move || self.set().map_err(std::io::Error::from));
        }
    }

    /// Sets the limits in this process.
    fn set(self) -> nix::Result<()> {
        if let Some(soft) = self.nofile {
            let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
            setrlimit(Resource::RLIMIT_NOFILE, soft.min(hard), hard)?;
        }
        let (_, hard) = getrlimit(Resource::RLIMIT_FSIZE)?;
        let max = self.file_max.min(hard);
        setrlimit(Resource::RLIMIT_FSIZE, max, max)
    }
}
