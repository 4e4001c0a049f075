//! The local command runner of `exec` (the `exec` feature, `security.exec.enabled`): a
//! command run as its argv says, with no shell, bounded in time and in output.
//!
//! - **The program.** `argv[0]` without a slash is looked for in the policy's `PATH`
//!   folders, in order (the first executable file of that name; none: `not_found`); with a
//!   slash it must be an absolute path (else `invalid_arguments`, rule `absolute`).
//! - **Its folder.** Each call runs in a folder of its own, `<store>/exec/<random>` (mode
//!   0700), made when the call starts and removed with what is in it when the call ends,
//!   however it ends (a call dropped with its turn too: then just after it, on a blocking
//!   thread); a folder the command made unwritable is opened up (`u+rwx`) and removed. What a
//!   daemon that stopped mid-call left there is removed when the next one starts ([`sweep`]).
//! - **Its environment.** Cleared, then `PATH` (the policy's), `HOME` and `TMPDIR` (the
//!   folder). A runner makes the daemon not dumpable (`PR_SET_DUMPABLE` 0), so that the
//!   daemon's `/proc/<pid>/environ`, `mem` and `fd` are closed to its commands, which run as
//!   the same user: the environment the daemon was started with does not reach them.
//! - **How many.** At most the policy's `concurrency` calls run at once; one past it is
//!   refused (`cannot_start`).
//! - **Its limits.** The daemon raises its own soft `RLIMIT_NOFILE` (`daemon::descriptors`);
//!   a command is given back the soft limit the daemon started with. The largest file it may
//!   write is the policy's `file_max` (`RLIMIT_FSIZE`, soft and hard, so that it cannot
//!   raise it): a write past it ends it with `SIGXFSZ` (its answer's signal, 25), or fails
//!   with `EFBIG` when it ignores that signal.
//! - **Its input.** The call's `stdin`, then end of file; none: `/dev/null`.
//! - **Its time.** The call's `timeout`, else the policy's default; one past the policy's
//!   maximum is refused (`invalid_arguments`, rule `maximum`). The command leads a process
//!   group of its own: at its timeout the whole group is killed (`SIGKILL`), children and
//!   grandchildren too, and the answer says `timed_out`. When the command exits, whatever it
//!   left running in its group is killed the same way, so a call never outlives its command
//!   (the command's exit is seen before it is reaped, and the group killed between, so that
//!   its id cannot have been taken by another group);
//!   a process that left the group (`setsid`) and holds the output open is cut at the timeout.
//!   Called in a model's turn, the command is ended the same way when the turn ends, if its
//!   timeout would come later (`timed_out`, with what it wrote).
//! - **Its output.** stdout and stderr are each read to their end, the first `output_max`
//!   bytes kept and the rest dropped (`truncated`), so a command writing more never blocks.

mod capture;
mod limits;
#[cfg(test)]
mod tests;

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use agentd_tools::Error;
use agentd_tools::exec::{Command, Exec, Exit, Ran, Running, TOOL};
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, waitid};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::sync::{Semaphore, oneshot};
use tokio::time::Instant;

use self::capture::Capture;
use self::limits::Limits;
use crate::config::security;

/// The folder under the store the calls' folders are made in.
const FOLDER: &str = "exec";

/// How many taken names a call's folder skips before the call gives up.
const NAMES_TRIED: usize = 4;

/// Removes the calls' folders a daemon that stopped mid-call left under the store in
/// `store`; called at start, before any call.
pub(crate) fn sweep(store: &Path) -> io::Result<()> {
    remove(&store.join(FOLDER))
}

/// Runs `exec`'s commands under a policy, each in a folder of its own under the store.
#[derive(Debug)]
pub(crate) struct Runner {
    policy: security::Exec,
    /// `<store>/exec`.
    root: PathBuf,
    /// A permit for each call that may run now.
    running: Arc<Semaphore>,
    /// The limits each command starts under.
    limits: Limits,
}

impl Runner {
    /// The runner of `policy` for the store in `store`, its commands given back the soft
    /// `RLIMIT_NOFILE` of `nofile` (`None`: they keep the daemon's); makes the daemon not
    /// dumpable, as the module says.
    pub(crate) fn new(store: &Path, policy: security::Exec, nofile: Option<u64>) -> Self {
        // It fails only for an attribute Linux does not know.
        let _ = nix::sys::prctl::set_dumpable(false);
        Self {
            running: Arc::new(Semaphore::new(policy.concurrency)),
            limits: Limits {
                nofile,
                file_max: policy.file_max,
            },
            policy,
            root: store.join(FOLDER),
        }
    }

    /// Runs `command` to its end or its timeout, or the end of the turn that called it
    /// when that comes first.
    async fn command(&self, command: Command) -> Result<Ran, Error> {
        let timeout = self.timeout(command.timeout)?;
        let timeout = command.within.map_or(timeout, |within| within.min(timeout));
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
        let Ok(_permit) = self.running.clone().try_acquire_owned() else {
            return Err(Error::CannotStart {
                program: name.clone(),
                detail: format!(
                    "security.exec.concurrency ({}) calls are running",
                    self.policy.concurrency
                ),
            });
        };
        let (program, folder) = self.prepare(name).await?;
        let mut spawn = tokio::process::Command::new(&program);
        spawn
            .args(args)
            .current_dir(folder.path())
            .env_clear()
            .env("PATH", &self.policy.path)
            .env("HOME", folder.path())
            .env("TMPDIR", folder.path())
            .stdin(match command.stdin {
                Some(_) => Stdio::piped(),
                None => Stdio::null(),
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        self.limits.apply(&mut spawn);
        let started = Instant::now();
        let mut child = match spawn.spawn() {
            Ok(child) => child,
            Err(e) => {
                folder.remove().await;
                return Err(cannot_start(name, &e));
            }
        };
        // The command leads its group: the group's id is its process id.
        let leader = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        let mut group = Group(leader);
        let exited = match leader.map(exit_seen).transpose() {
            Ok(exited) => exited,
            Err(e) => return Err(cannot_start(name, &e)),
        };
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
                if let Some(exited) = exited {
                    // Not reaped yet: the group's id is still the leader's, no one else's.
                    let _ = exited.await;
                }
                group.kill();
                child.wait().await
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
        folder.remove().await;
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

    /// The file `name` names and a fresh folder for its call, found and made on a blocking
    /// thread.
    async fn prepare(&self, name: &str) -> Result<(PathBuf, Folder), Error> {
        let (path, root, name) = (self.policy.path.clone(), self.root.clone(), name.to_owned());
        let cannot = |detail: String| Error::CannotStart {
            program: name.clone(),
            detail,
        };
        tokio::task::spawn_blocking({
            let name = name.clone();
            move || Ok((program(&path, &name)?, folder(&root, &name)?))
        })
        .await
        .map_err(|e| cannot(e.to_string()))?
    }
}

impl Exec for Runner {
    fn run(&self, command: Command) -> Running<'_> {
        Box::pin(self.command(command))
    }
}

/// The file `program` names: an absolute path as it is, a name looked for in the folders of
/// `path`.
fn program(path: &str, program: &str) -> Result<PathBuf, Error> {
    if program.contains('/') {
        if Path::new(program).is_absolute() {
            return Ok(PathBuf::from(program));
        }
        let message = "a program named with a slash is an absolute path";
        return Err(invalid("/command/0", "absolute", message));
    }
    path.split(':')
        .map(|folder| Path::new(folder).join(program))
        .find(|file| is_executable(file))
        .ok_or_else(|| Error::NotFound {
            what: format!("program {program:?} in security.exec.path"),
        })
}

/// A fresh folder under `root` for a call of `program`, of a random name.
fn folder(root: &Path, program: &str) -> Result<Folder, Error> {
    let cannot = |e: &io::Error| Error::CannotStart {
        program: program.to_owned(),
        detail: format!("its folder under {}: {e}", root.display()),
    };
    std::fs::create_dir_all(root).map_err(|e| cannot(&e))?;
    for _ in 0..NAMES_TRIED {
        let name = u64::from_ne_bytes(crate::clock::random_bytes());
        let path = root.join(format!("{name:016x}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(Folder(Some(path))),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(cannot(&e)),
        }
    }
    Err(cannot(&io::Error::from(io::ErrorKind::AlreadyExists)))
}

/// A call's folder, removed with what is in it: when the call ends, or, dropped, on a
/// blocking thread (at once without a runtime).
#[derive(Debug)]
struct Folder(Option<PathBuf>);

impl Folder {
    fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new(""))
    }

    /// Removes the folder and waits for it.
    async fn remove(mut self) {
        if let Some(path) = self.0.take() {
            // What cannot be removed now is removed at the next start (`sweep`).
            let _ = tokio::task::spawn_blocking(move || remove(&path)).await;
        }
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let Some(path) = self.0.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || remove(&path))),
            Err(_) => drop(remove(&path)),
        }
    }
}

/// Removes `folder` and what is in it (nothing there: done); folders in it that refuse are
/// given `u+rwx` and the removal tried again.
fn remove(folder: &Path) -> io::Result<()> {
    let removed = |r: io::Result<()>| match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    };
    if removed(std::fs::remove_dir_all(folder)).is_ok() {
        return Ok(());
    }
    let mut folders = vec![folder.to_owned()];
    while let Some(f) = folders.pop() {
        let _ = std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o700));
        let Ok(entries) = std::fs::read_dir(&f) else {
            continue;
        };
        // `file_type` does not follow links: only folders in the tree are opened up.
        folders.extend(
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path()),
        );
    }
    removed(std::fs::remove_dir_all(folder))
}

/// Tells when process `leader` (a child of the daemon) has exited, without reaping it: a
/// thread of its own waits (`waitid`, `WNOWAIT`), and ends when the process does.
fn exit_seen(leader: Pid) -> io::Result<oneshot::Receiver<()>> {
    let (seen, exited) = oneshot::channel();
    std::thread::Builder::new()
        .name("exec-wait".to_owned())
        .spawn(move || {
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
            while waitid(Id::Pid(leader), flags) == Err(nix::errno::Errno::EINTR) {}
            let _ = seen.send(());
        })?;
    Ok(exited)
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
