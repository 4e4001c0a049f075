//! The runner against real processes: argv without a shell, the environment, the folder,
//! the output bound at and past it, the process group killed at the timeout and at the
//! command's exit and when the call is dropped, the calls running at once, the daemon closed
//! to its commands, folders that refuse removal, and odd commands as typed errors.

use std::fs::Permissions;
use std::future::pending;
use std::time::Duration;

use agentd_tools::Error;
use agentd_tools::exec::{Captured, Command, Exec as _, Exit, Ran};

use super::*;

/// A runner over a fresh store, keeping `output_max` bytes a stream.
fn runner(output_max: usize) -> (Runner, tempfile::TempDir) {
    policy_runner(security::Exec {
        output_max,
        ..security::Exec::default()
    })
}

/// A runner of `policy` over a fresh store.
fn policy_runner(policy: security::Exec) -> (Runner, tempfile::TempDir) {
    let store = tempfile::tempdir().unwrap();
    (Runner::new(store.path(), policy, None), store)
}

/// Whether the calls' folders under `store` are all gone.
fn no_folders(store: &Path) -> bool {
    std::fs::read_dir(store.join(FOLDER)).map_or(true, |d| d.count() == 0)
}

fn argv(items: &[&str]) -> Command {
    Command::new(items.iter().map(|s| (*s).to_owned()).collect())
}

/// Runs `items` with no deadline but the command's end.
async fn ran(runner: &Runner, items: &[&str]) -> Ran {
    runner.command_until(argv(items), pending()).await.unwrap()
}

fn text(c: &Captured) -> &str {
    std::str::from_utf8(&c.bytes).unwrap()
}

/// Waits (30 s at most) until `what` holds.
async fn until(what: &str, holds: impl Fn() -> bool) {
    for _ in 0..3000 {
        if holds() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what} did not come in 30 s");
}

/// Whether process `pid` has ended (gone, or a zombie nobody has reaped yet).
fn ended(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // `pid (comm) S …`: the state follows the last `)`.
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z')),
    }
}

/// The process id a command wrote to `file`.
fn pid_in(file: &Path) -> i32 {
    std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn exec_runs_argv_without_a_shell() {
    let (runner, _store) = runner(1024);
    let got = ran(&runner, &["echo", "a  b", "$HOME", "*", ";", "true"]).await;
    assert_eq!(text(&got.stdout), "a  b $HOME * ; true\n");
    assert_eq!((got.exit, got.timed_out), (Exit::Code(0), false));
    let failed = ran(&runner, &["sh", "-c", "echo no >&2; exit 7"]).await;
    assert_eq!((failed.exit, text(&failed.stderr)), (Exit::Code(7), "no\n"));
    assert_eq!(ran(&runner, &["/bin/true"]).await.exit, Exit::Code(0));
}

#[tokio::test]
async fn exec_clears_the_environment_and_runs_in_a_folder_under_the_store() {
    let (runner, store) = runner(64 * 1024);
    let env = ran(&runner, &["env"]).await;
    let mut lines: Vec<&str> = text(&env.stdout).lines().collect();
    lines.sort_unstable();
    let folder = lines[0].strip_prefix("HOME=").unwrap().to_owned();
    assert_eq!(
        lines,
        [
            format!("HOME={folder}"),
            format!("PATH={}", security::PATH),
            format!("TMPDIR={folder}"),
        ]
    );
    let exec = store.path().join("exec");
    assert_eq!(Path::new(&folder).parent(), Some(exec.as_path()));
    let pwd = ran(&runner, &["pwd"]).await;
    let cwd = PathBuf::from(text(&pwd.stdout).trim_end());
    assert_eq!(cwd.parent(), Some(exec.as_path()));
    assert_ne!(cwd, Path::new(&folder), "a folder of its own each call");
    // Files the command leaves go with its folder.
    ran(&runner, &["sh", "-c", "mkdir -p d/e && echo x > d/e/f"]).await;
    assert_eq!(std::fs::read_dir(&exec).unwrap().count(), 0);
}

#[tokio::test]
async fn exec_feeds_stdin_or_nothing() {
    let (runner, _store) = runner(1024);
    let mut fed = argv(&["cat"]);
    fed.stdin = Some("hello\n".into());
    let got = runner.command_until(fed, pending()).await.unwrap();
    assert_eq!(text(&got.stdout), "hello\n");
    let none = ran(&runner, &["cat"]).await;
    assert_eq!((none.exit, text(&none.stdout)), (Exit::Code(0), ""));
    // A command that reads none of a large input still ends.
    let mut unread = argv(&["true"]);
    unread.stdin = Some("x".repeat(agentd_tools::exec::STDIN_MAX));
    let got = runner.command_until(unread, pending()).await.unwrap();
    assert_eq!(got.exit, Exit::Code(0));
}

#[tokio::test]
async fn exec_output_is_kept_to_the_bound_and_cut_past_it() {
    let (runner, _store) = runner(8);
    let at = ran(
        &runner,
        &["sh", "-c", "printf 12345678; printf abcdefgh >&2"],
    )
    .await;
    assert_eq!(at.stdout, Captured::new(b"12345678".to_vec(), false));
    assert_eq!(at.stderr, Captured::new(b"abcdefgh".to_vec(), false));
    let past = ran(
        &runner,
        &["sh", "-c", "printf 123456789; printf abcdefghi >&2"],
    )
    .await;
    assert_eq!(past.stdout, Captured::new(b"12345678".to_vec(), true));
    assert_eq!(past.stderr, Captured::new(b"abcdefgh".to_vec(), true));
    assert_eq!(
        past.to_value()["truncated"],
        serde_json::json!({"stdout": true, "stderr": true})
    );
    // Far more than a pipe holds: read to the end, the command never blocked.
    let flood = ran(&runner, &["head", "-c", "10000000", "/dev/zero"]).await;
    assert_eq!(
        (flood.exit, flood.stdout.bytes.len(), flood.stdout.truncated),
        (Exit::Code(0), 8, true)
    );
}

#[tokio::test]
async fn exec_timeout_kills_the_command_and_its_grandchildren() {
    let (runner, _store) = runner(1024);
    let marks = tempfile::tempdir().unwrap();
    let file = marks.path().join("pid");
    let script = format!("sleep 1000 & echo $! > {}; wait", file.display());
    // The deadline comes once the grandchild is there.
    let deadline = until("the grandchild", || {
        std::fs::read_to_string(&file).is_ok_and(|t| t.ends_with('\n'))
    });
    let got = runner
        .command_until(argv(&["sh", "-c", &script]), deadline)
        .await
        .unwrap();
    assert!(got.timed_out);
    assert_eq!(got.exit, Exit::Signal(9));
    let grandchild = pid_in(&file);
    until("the grandchild's end", || ended(grandchild)).await;
}

#[tokio::test]
async fn exec_kills_what_the_command_leaves_running() {
    let (runner, _store) = runner(1024);
    let marks = tempfile::tempdir().unwrap();
    let file = marks.path().join("pid");
    // The background sleep holds stdout open: the call would wait for it.
    let script = format!("sleep 1000 & echo $! > {}", file.display());
    let got = ran(&runner, &["sh", "-c", &script]).await;
    assert_eq!((got.exit, got.timed_out), (Exit::Code(0), false));
    let grandchild = pid_in(&file);
    until("the grandchild's end", || ended(grandchild)).await;
}

#[tokio::test(start_paused = true)]
async fn exec_timeout_is_the_call_s_or_the_default_and_at_most_the_maximum() {
    let (runner, _store) = runner(1024);
    let mut slow = argv(&["sleep", "1000"]);
    slow.timeout = Some(Duration::from_secs(5));
    let got = runner.run(slow.clone()).await.unwrap();
    assert!(got.timed_out, "{got:?}");
    assert_eq!(got.exit, Exit::Signal(9));
    assert!(got.duration >= Duration::from_secs(5), "{got:?}");
    let got = runner.run(argv(&["sleep", "1000"])).await.unwrap();
    assert!(
        got.timed_out && got.duration >= security::TIMEOUT,
        "{got:?}"
    );
    slow.timeout = Some(security::TIMEOUT_MAX);
    assert!(runner.run(slow.clone()).await.unwrap().timed_out);
    // Called in a turn: ended at the turn's end or the timeout, whichever comes first.
    for (within, ended) in [(3, 3), (7, 5)] {
        let mut in_turn = argv(&["sleep", "1000"]);
        in_turn.timeout = Some(Duration::from_secs(5));
        in_turn.within = Some(Duration::from_secs(within));
        let started = Instant::now();
        let got = runner.run(in_turn).await.unwrap();
        assert!(got.timed_out, "{got:?}");
        assert_eq!(started.elapsed().as_secs(), ended, "within {within}");
    }
    slow.timeout = Some(security::TIMEOUT_MAX + Duration::from_millis(1));
    let past = runner.run(slow).await.unwrap_err();
    assert!(
        matches!(&past, Error::InvalidArguments { pointer, rule, .. } if pointer == "/timeout" && rule == "maximum"),
        "{past:?}"
    );
}

#[tokio::test]
async fn exec_odd_commands_are_typed_errors() {
    let (runner, store) = runner(1024);
    let code = |got: Result<Ran, Error>| got.map_or_else(|e| e.code(), |r| panic!("{r:?}"));
    let run = |items: &[&str]| runner.command_until(argv(items), pending());
    assert_eq!(code(run(&[]).await), "invalid_arguments");
    assert_eq!(code(run(&[""]).await), "invalid_arguments");
    assert_eq!(code(run(&["echo", "a\0b"]).await), "invalid_arguments");
    assert_eq!(code(run(&["ech\0o"]).await), "invalid_arguments");
    let relative = run(&["./echo"]).await.unwrap_err();
    assert!(
        matches!(&relative, Error::InvalidArguments { rule, .. } if rule == "absolute"),
        "{relative:?}"
    );
    assert_eq!(code(run(&["surely-no-such-program"]).await), "not_found");
    assert_eq!(code(run(&["/surely/no/such/program"]).await), "not_found");
    assert_eq!(code(run(&["/"]).await), "cannot_start");
    let huge = vec!["x"; agentd_tools::exec::ARGS_MAX + 1];
    assert_eq!(code(run(&huge).await), "too_large");
    // None of them left a folder.
    assert!(no_folders(store.path()));
}

#[tokio::test]
async fn exec_folders_left_by_a_stopped_daemon_are_swept() {
    let (runner, store) = runner(1024);
    let left = store.path().join("exec").join("0");
    std::fs::create_dir_all(left.join("locked").join("inside")).unwrap();
    std::fs::set_permissions(left.join("locked"), Permissions::from_mode(0o000)).unwrap();
    // A call's name is its own.
    assert_eq!(ran(&runner, &["true"]).await.exit, Exit::Code(0));
    assert!(left.exists());
    sweep(store.path()).unwrap();
    assert!(!store.path().join("exec").exists());
    sweep(store.path()).unwrap();
}

#[tokio::test]
async fn exec_removes_a_folder_the_command_locked() {
    let (runner, store) = runner(1024);
    let script = "mkdir -p d/e && touch d/e/f && ln -s / d/root && chmod 000 d/e d";
    let got = ran(&runner, &["sh", "-c", script]).await;
    assert_eq!(got.exit, Exit::Code(0), "{got:?}");
    assert!(no_folders(store.path()));
    // A link is not followed.
    assert!(Path::new("/").metadata().unwrap().permissions().mode() & 0o777 != 0o700);
}

#[tokio::test]
async fn exec_runs_at_most_concurrency_calls_at_once() {
    let (runner, _store) = policy_runner(security::Exec {
        concurrency: 2,
        ..security::Exec::default()
    });
    let (end_a, a) = oneshot::channel::<()>();
    let (end_b, b) = oneshot::channel::<()>();
    let call = |end: oneshot::Receiver<()>| {
        runner.command_until(argv(&["sleep", "1000"]), async {
            let _ = end.await;
        })
    };
    // Polled in order: the two calls hold the two permits before the third asks.
    let (a, b, ()) = tokio::join!(call(a), call(b), async {
        let past = runner
            .command_until(argv(&["true"]), pending())
            .await
            .unwrap_err();
        assert!(
            matches!(&past, Error::CannotStart { detail, .. } if detail.contains("concurrency (2)")),
            "{past:?}"
        );
        end_a.send(()).unwrap();
        until("a call's end", || runner.running.available_permits() == 1).await;
        assert_eq!(ran(&runner, &["true"]).await.exit, Exit::Code(0));
        end_b.send(()).unwrap();
    });
    assert!(a.unwrap().timed_out && b.unwrap().timed_out);
    assert_eq!(runner.running.available_permits(), 2);
}

#[tokio::test]
async fn exec_a_dropped_call_kills_its_group_and_removes_its_folder() {
    let (runner, store) = runner(1024);
    let marks = tempfile::tempdir().unwrap();
    let file = marks.path().join("pid");
    let script = format!("sleep 1000 & echo $! > {}; wait", file.display());
    tokio::select! {
        got = runner.command_until(argv(&["sh", "-c", &script]), pending()) => {
            panic!("{got:?}")
        }
        () = until("the grandchild", || {
            std::fs::read_to_string(&file).is_ok_and(|t| t.ends_with('\n'))
        }) => {}
    }
    let grandchild = pid_in(&file);
    until("the grandchild's end", || ended(grandchild)).await;
    until("the folder's removal", || no_folders(store.path())).await;
    assert_eq!(runner.running.available_permits(), security::CONCURRENCY);
}

#[tokio::test]
async fn exec_closes_the_daemon_s_process_files_to_its_commands() {
    let (runner, _store) = runner(1024);
    assert_eq!(nix::sys::prctl::get_dumpable(), Ok(false));
    // Root reads any process's files; another user is refused the non-dumpable daemon's.
    let mine = tempfile::tempfile().unwrap().metadata().unwrap();
    if std::os::unix::fs::MetadataExt::uid(&mine) == 0 {
        return;
    }
    let got = ran(&runner, &["sh", "-c", "cat /proc/$PPID/environ"]).await;
    assert_ne!(got.exit, Exit::Code(0), "{got:?}");
    assert!(got.stdout.bytes.is_empty(), "{got:?}");
}

#[tokio::test]
async fn exec_gives_commands_back_the_descriptor_limit_it_was_given() {
    use nix::sys::resource::{Resource, getrlimit};
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    let given = (soft / 2).max(32);
    let store = tempfile::tempdir().unwrap();
    let given_back = Runner::new(store.path(), security::Exec::default(), Some(given));
    let got = ran(&given_back, &["sh", "-c", "ulimit -Sn"]).await;
    assert_eq!(text(&got.stdout), format!("{given}\n"), "{got:?}");
    // None: the daemon's own.
    let (runner, _store) = runner(1024);
    let got = ran(&runner, &["sh", "-c", "ulimit -Sn"]).await;
    assert_eq!(text(&got.stdout), format!("{soft}\n"), "{got:?}");
}

#[tokio::test]
async fn exec_commands_write_files_up_to_file_max() {
    let (runner, _store) = policy_runner(security::Exec {
        file_max: 4096,
        ..security::Exec::default()
    });
    let dd = |bytes: &str| {
        ["dd", "if=/dev/zero", "of=f", "count=1"]
            .map(str::to_owned)
            .into_iter()
            .chain([format!("bs={bytes}")])
            .collect::<Vec<_>>()
    };
    let at = runner
        .command_until(Command::new(dd("4096")), pending())
        .await
        .unwrap();
    assert_eq!(at.exit, Exit::Code(0), "{at:?}");
    let past = runner
        .command_until(Command::new(dd("4097")), pending())
        .await
        .unwrap();
    assert_eq!(past.exit, Exit::Signal(Signal::SIGXFSZ as i32), "{past:?}");
    // One that ignores the signal is told EFBIG, and ends as it chooses.
    let ignored = [
        "sh",
        "-c",
        "trap '' XFSZ; dd if=/dev/zero of=f bs=4097 count=1",
    ];
    let got = ran(&runner, &ignored).await;
    assert_eq!(got.exit, Exit::Code(1), "{got:?}");
    assert!(text(&got.stderr).contains("File too large"), "{got:?}");
    // The command cannot raise it.
    let got = ran(&runner, &["sh", "-c", "ulimit -f unlimited"]).await;
    assert_ne!(got.exit, Exit::Code(0), "{got:?}");
}
