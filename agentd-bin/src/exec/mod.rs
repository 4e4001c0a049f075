//! The local command runner of `exec` (the `exec` feature, `security.exec.enabled`): a
//! command run as its argv says, with no shell, bounded in time and in output.
//!
//! - **The program.** `argv[0]` without a slash is looked for in the policy's `PATH`
//!   folders, in order (the first executable file of that name; none: `not_found`); with a
//!   slash it must be an absolute path (else `invalid_arguments`, rule `absolute`).
//! - **Its folder.** Each call runs in a folder of its own, `<store>/exec/<n>` (mode 0700),
//!   made when the call starts and removed with what is in it when the call ends, however it
//!   ends (a call dropped with its turn too). What a daemon that stopped mid-call left there is
//!   removed when the next one starts ([`sweep`]).
//! - **Its environment.** Cleared, then `PATH` (the policy's), `HOME` and `TMPDIR` (the
//!   folder); nothing of the daemon's environment reaches the command.
//! - **Its input.** The call's `stdin`, then end of file; none: `/dev/null`.
//! - **Its time.** The call's `timeout`, else the policy's default; one past the policy's
//!   maximum is refused (`invalid_arguments`, rule `maximum`). The command leads a process
//!   group of its own: at its timeout the whole group is killed (`SIGKILL`), children and
//!   grandchildren too, and the answer says `timed_out`. When the command exits, whatever it
//!   left running in its group is killed the same way, so a call never outlives its command;
//!   a process that left the group (`setsid`) and holds the output open is cut at the timeout.
//! - **Its output.** stdout and stderr are each read to their end, the first `output_max`
//!   bytes kept and the rest dropped (`truncated`), so a command writing more never blocks.

mod capture;
#[cfg(test)]
mod tests;

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentd_tools::Error;
use agentd_tools::exec::{Command, Exec, Exit, Ran, Running, TOOL};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use self::capture::Capture;
use crate::config::security;

/// The folder under the store the calls' folders are made in.
const FOLDER: &str = "exec";

/// How many taken names a call's folder skips before the call gives up.
const NAMES_TRIED: usize = 64;

/// Removes the calls' folders a daemon that stopped mid-call left under the store in
/// `store`; called at start, before any call.
pub(crate) fn sweep(store: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(store.join(FOLDER)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Runs `exec`'s commands under a policy, each in a folder of its own under the store.
#[derive(Debug)]
pub(crate) struct Runner {
    policy: security::Exec,
    /// `<store>/exec`.
    root: PathBuf,
    /// The number of the next call's folder.
    next: AtomicU64,
}

impl Runner {
    /// The runner of `policy` for the store in `store`.
    pub(crate) fn new(store: &Path, policy: security::Exec) -> Self {
        Self {
            policy,
            root: store.join(FOLDER),
            next: AtomicU64::new(0),
        }
    }

    /// Runs `command` to its end or its timeout.
    async fn command(&self, command: Command) -> Result<Ran, Error> {
        let timeout = self.timeout(command.timeout)?;
        self.command_until(command, tokio::time::sleep(timeout))
            .await
    }

    /// Runs `command` to its end, or until `deadline` comes: the timeout checked already.
    async fn command_until(
        &self,
        command: Command,
        deadline: impl Future<Output = ()>,
    ) -> Result<Ran, Error> {
        command.check()?;
        let Some((name, args)) = command.argv.split_first() else {
            return Err(invalid("/command", "minItems", "no program"));
        };
        let program = self.program(name)?;
        let folder = self.folder(name)?;
        let mut spawn = tokio::process::Command::new(&program);
        spawn
            .args(args)
            .current_dir(&folder.0)
            .env_clear()
            .env("PATH", &self.policy.path)
            .env("HOME", &folder.0)
            .env("TMPDIR", &folder.0)
            .stdin(match command.stdin {
                Some(_) => Stdio::piped(),
                None => Stdio::null(),
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let started = Instant::now();
        let mut child = spawn.spawn().map_err(|e| cannot_start(name, &e))?;
        // The command leads its group: the group's id is its process id.
        let mut group = Group(
            child
                .id()
                .and_then(|id| i32::try_from(id).ok())
                .map(Pid::from_raw),
        );
        let (input, stdout, stderr) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let mut out = Capture::new(self.policy.output_max);
        let mut err = Capture::new(self.policy.output_max);
        let ended = {
            let feed = async {
                if let (Some(mut pipe), Some(text)) = (input, &command.stdin) {
                    // A command that exits without reading it all closes the pipe: no error.
                    let _ = pipe.write_all(text.as_bytes()).await;
                }
            };
            let waited = async {
                let status = child.wait().await;
                group.kill();
                status
            };
            let work = async {
                let (status, (), (), ()) =
                    tokio::join!(waited, out.drain(stdout), err.drain(stderr), feed);
                status
            };
            tokio::select! {
                biased;
                status = work => Some(status),
                () = deadline => None,
            }
        };
        let (status, timed_out) = match ended {
            Some(status) => (status, false),
            None => {
                group.kill();
                (child.wait().await, true)
            }
        };
        let mut ran = Ran::new(
            exit(status.ok()),
            out.captured(),
            err.captured(),
            started.elapsed(),
        );
        ran.timed_out = timed_out;
        Ok(ran)
    }

    /// The timeout of a call naming `asked`: the policy's default when it names none; one
    /// past the policy's maximum refused.
    fn timeout(&self, asked: Option<Duration>) -> Result<Duration, Error> {
        let max = self.policy.timeout_max;
        match asked {
            None => Ok(self.policy.timeout),
            Some(t) if t <= max => Ok(t),
            Some(_) => {
                let max = humantime::format_duration(max);
                let message = format!("past security.exec.timeout_max ({max})");
                Err(invalid("/timeout", "maximum", &message))
            }
        }
    }

    /// The file `program` names: an absolute path as it is, a name looked for in the
    /// policy's folders.
    fn program(&self, program: &str) -> Result<PathBuf, Error> {
        if program.contains('/') {
            if Path::new(program).is_absolute() {
                return Ok(PathBuf::from(program));
            }
            let message = "a program named with a slash is an absolute path";
            return Err(invalid("/command/0", "absolute", message));
        }
        self.policy
            .path
            .split(':')
            .map(|folder| Path::new(folder).join(program))
            .find(|file| is_executable(file))
            .ok_or_else(|| Error::NotFound {
                what: format!("program {program:?} in security.exec.path"),
            })
    }

    /// A fresh folder for a call of `program`, under the store.
    fn folder(&self, program: &str) -> Result<Folder, Error> {
        let cannot = |e: &io::Error| Error::CannotStart {
            program: program.to_owned(),
            detail: format!("its folder under {}: {e}", self.root.display()),
        };
        std::fs::create_dir_all(&self.root).map_err(|e| cannot(&e))?;
        for _ in 0..NAMES_TRIED {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let path = self.root.join(n.to_string());
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(Folder(path)),
                // A folder a call of an earlier runner of this daemon (before a reload) holds.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(cannot(&e)),
            }
        }
        Err(cannot(&io::Error::from(io::ErrorKind::AlreadyExists)))
    }
}

impl Exec for Runner {
    fn run(&self, command: Command) -> Running<'_> {
        Box::pin(self.command(command))
    }
}

/// A call's folder, removed with what is in it when dropped.
#[derive(Debug)]
struct Folder(PathBuf);

impl Drop for Folder {
    fn drop(&mut self) {
        // What cannot be removed now is removed at the next start (`sweep`).
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A command's process group, killed once: when the command exits, at its timeout, or when
/// the call is dropped.
#[derive(Debug)]
struct Group(Option<Pid>);

impl Group {
    /// Kills every process left in the group (`SIGKILL`); nothing the second time.
    fn kill(&mut self) {
        if let Some(group) = self.0.take() {
            // ESRCH: nothing is left in it.
            let _ = killpg(group, Signal::SIGKILL);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether `file` is a file someone may execute.
fn is_executable(file: &Path) -> bool {
    std::fs::metadata(file).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// How a command ended, by its exit status (`None`: not known).
fn exit(status: Option<ExitStatus>) -> Exit {
    match status {
        Some(s) => s
            .code()
            .map(Exit::Code)
            .or_else(|| s.signal().map(Exit::Signal))
            .unwrap_or(Exit::Unknown),
        None => Exit::Unknown,
    }
}

/// `exec`'s arguments at `pointer` break `rule`.
fn invalid(pointer: &str, rule: &str, message: &str) -> Error {
    Error::InvalidArguments {
        tool: TOOL.to_owned(),
        pointer: pointer.to_owned(),
        rule: rule.to_owned(),
        message: message.to_owned(),
    }
}

/// The error of a command that `program` could not start with.
fn cannot_start(program: &str, e: &io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::NotFound => Error::NotFound {
            what: format!("program {program:?}"),
        },
        _ => Error::CannotStart {
            program: program.to_owned(),
            detail: e.to_string(),
        },
    }
}
