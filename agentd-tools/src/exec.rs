//! `exec`: one command run by a local runner ([`Exec`], which the daemon implements when it
//! is built and enabled for it), its outcome as `{"exit_code", "signal", "timed_out",
//! "duration_ms", "stdout", "stderr", "truncated": {"stdout", "stderr"}}`.
//!
//! The call is `{"command": [argv…], "stdin"?, "timeout"?}`: `command` is the program and its
//! arguments, passed as they are (no shell reads them); `stdin` the text the command reads
//! (none: it reads nothing); `timeout` a duration (the runner's default when not given, at
//! most its maximum). The arguments are checked here, before the runner sees them: at most
//! [`ARGS_MAX`] items of at most [`COMMAND_MAX`] bytes together (`too_large`, what `command`),
//! a program that is not empty, no NUL byte in any item (`invalid_arguments`, naming the item
//! and the rule `nul`), `stdin` of at most [`STDIN_MAX`] bytes (`too_large`, what `stdin`).
//!
//! The answer is at most [`ANSWER_MAX`] bytes of JSON text: past it the streams are cut (at
//! a character, each given half of the room the rest of the answer leaves, or what the other
//! does not use) and say `truncated`, so a caller that bounds what it reads (a turn, a
//! workflow's output) always gets the answer whole.
//!
//! Called in a model's turn, a command is ended at the turn's end if its timeout would come
//! later ([`Command::within`]): its answer says `timed_out` and keeps the output it wrote, so
//! the turn reads what the command did rather than a cut call.
//!
//! Without a runner the tool is not offered, and a call is `not_offered` ([`NOT_OFFERED`]
//! says why).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::Error;
use crate::schema::{parse, read_duration};

/// The tool's name.
pub const TOOL: &str = "exec";

/// The most items of a command: the program and its arguments.
pub const ARGS_MAX: usize = 1024;
/// The most bytes of a command's items together.
pub const COMMAND_MAX: usize = 128 * 1024;
/// The most bytes of a command's `stdin`.
pub const STDIN_MAX: usize = 1024 * 1024;

/// The most bytes of an answer's JSON text: below a turn's bound on what the model reads of a
/// call (100 KiB) and a workflow's on a step's output (256 KiB unless configured).
pub const ANSWER_MAX: usize = 64 * 1024;

/// Why `exec` is not offered when the daemon gives no runner.
pub const NOT_OFFERED: &str = "no local command runner: it runs in an agentd built with the \
     exec feature whose configuration sets security.exec.enabled = true";

/// A command to run, checked ([`Command::parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Command {
    /// The program (`argv[0]`) and its arguments: at least the program, none empty of it,
    /// no NUL byte in any.
    pub argv: Vec<String>,
    /// What the command reads on its standard input; `None`: nothing (it reads end of file).
    pub stdin: Option<String>,
    /// How long it may run; `None`: the runner's default.
    pub timeout: Option<Duration>,
    /// What is left of the turn that calls it, when a turn does: it is ended then, as at
    /// its timeout, if its timeout comes later. `None`: its timeout alone ends it.
    pub within: Option<Duration>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    command: Vec<String>,
    stdin: Option<String>,
    timeout: Option<Value>,
}

impl Command {
    /// `argv` with nothing on its standard input and the runner's default timeout; unchecked.
    pub fn new(argv: Vec<String>) -> Self {
        Self {
            argv,
            stdin: None,
            timeout: None,
            within: None,
        }
    }

    /// The command of `exec`'s `arguments`, checked as the module says.
    pub fn parse(arguments: Value) -> Result<Self, Error> {
        let args: Args = parse(TOOL, arguments)?;
        let timeout = match &args.timeout {
            Some(t) => Some(read_duration(TOOL, "/timeout", t)?),
            None => None,
        };
        let command = Self {
            argv: args.command,
            stdin: args.stdin,
            timeout,
            within: None,
        };
        command.check()?;
        Ok(command)
    }

    /// Checks the bounds and the bytes of the command, as the module says.
    pub fn check(&self) -> Result<(), Error> {
        if self.argv.len() > ARGS_MAX {
            return Err(Error::TooLarge {
                what: "command",
                size: self.argv.len(),
                max: ARGS_MAX,
            });
        }
        let bytes = self.argv.iter().map(String::len).sum();
        if bytes > COMMAND_MAX {
            return Err(Error::TooLarge {
                what: "command",
                size: bytes,
                max: COMMAND_MAX,
            });
        }
        match self.argv.first() {
            None => return Err(Error::invalid(TOOL, "/command", "minItems", "no program")),
            Some(program) if program.is_empty() => {
                let message = "the program is empty";
                return Err(Error::invalid(TOOL, "/command/0", "minLength", message));
            }
            Some(_) => {}
        }
        if let Some(i) = self.argv.iter().position(|a| a.contains('\0')) {
            let pointer = format!("/command/{i}");
            return Err(Error::invalid(TOOL, &pointer, "nul", "holds a NUL byte"));
        }
        if let Some(stdin) = &self.stdin
            && stdin.len() > STDIN_MAX
        {
            return Err(Error::TooLarge {
                what: "stdin",
                size: stdin.len(),
                max: STDIN_MAX,
            });
        }
        Ok(())
    }
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it (its timeout's `SIGKILL` among them).
    Signal(i32),
    /// Its end is not known (it was not waited for).
    Unknown,
}

/// What a command wrote on one stream, kept up to the runner's bound.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Captured {
    /// The bytes kept: the first ones written, at most the bound.
    pub bytes: Vec<u8>,
    /// Whether more was written than kept.
    pub truncated: bool,
}

impl Captured {
    /// `bytes` kept, `truncated` when more were written.
    pub fn new(bytes: Vec<u8>, truncated: bool) -> Self {
        Self { bytes, truncated }
    }
}

/// What running a command came to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ran {
    /// How it ended.
    pub exit: Exit,
    /// Its standard output.
    pub stdout: Captured,
    /// Its standard error.
    pub stderr: Captured,
    /// Whether its timeout, or the end of the turn that called it, ended it.
    pub timed_out: bool,
    /// How long it ran.
    pub duration: Duration,
}

impl Ran {
    /// A command that ended as `exit` after `duration`, having written `stdout` and
    /// `stderr`.
    pub fn new(exit: Exit, stdout: Captured, stderr: Captured, duration: Duration) -> Self {
        Self {
            exit,
            stdout,
            stderr,
            timed_out: false,
            duration,
        }
    }

    /// The answer of `exec`: the streams as UTF-8, a byte sequence that is not UTF-8 replaced
    /// by U+FFFD (so a stream cut inside a character ends with one), cut to fit
    /// [`ANSWER_MAX`] as the module says.
    pub fn to_value(&self) -> Value {
        let text = |c: &Captured| String::from_utf8_lossy(&c.bytes).into_owned();
        let (mut stdout, mut stderr) = (text(&self.stdout), text(&self.stderr));
        // The rest of the answer, its flags at their longest (`false`).
        let rest = self.answer("", "", false, false).to_string().len();
        let room = ANSWER_MAX.saturating_sub(rest);
        let (out, err) = (escaped_len(&stdout), escaped_len(&stderr));
        let err_room = err.min(room - out.min(room / 2));
        let cut_err = cut(&mut stderr, err_room);
        let cut_out = cut(&mut stdout, room - err_room);
        self.answer(
            &stdout,
            &stderr,
            self.stdout.truncated || cut_out,
            self.stderr.truncated || cut_err,
        )
    }

    /// The answer with streams `stdout` and `stderr`, each `truncated` as given.
    fn answer(&self, stdout: &str, stderr: &str, cut_out: bool, cut_err: bool) -> Value {
        let (code, signal) = match self.exit {
            Exit::Code(code) => (Some(code), None),
            Exit::Signal(signal) => (None, Some(signal)),
            Exit::Unknown => (None, None),
        };
        json!({
            "exit_code": code,
            "signal": signal,
            "timed_out": self.timed_out,
            "duration_ms": u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
            "stdout": stdout,
            "stderr": stderr,
            "truncated": {"stdout": cut_out, "stderr": cut_err},
        })
    }
}

/// The bytes `c` takes inside a JSON string (`serde_json`'s escapes).
fn escaped(c: char) -> usize {
    match c {
        '"' | '\\' | '\u{8}' | '\t' | '\n' | '\u{c}' | '\r' => 2,
        '\0'..='\u{1f}' => 6,
        c => c.len_utf8(),
    }
}

/// The bytes `text` takes inside a JSON string.
fn escaped_len(text: &str) -> usize {
    text.chars().map(escaped).sum()
}

/// Cuts `text` at the last character that keeps it within `room` bytes inside a JSON string;
/// whether it cut.
fn cut(text: &mut String, room: usize) -> bool {
    let mut used = 0;
    for (at, c) in text.char_indices() {
        used += escaped(c);
        if used > room {
            text.truncate(at);
            return true;
        }
    }
    false
}

/// A future an [`Exec`] runner answers with.
pub type Running<'a> = Pin<Box<dyn Future<Output = Result<Ran, Error>> + Send + 'a>>;

/// A local command runner.
pub trait Exec: Send + Sync {
    /// Runs `command` (checked: [`Command::check`]) to its end or its timeout: a command that
    /// cannot start is an error (`not_found` for a program it does not find, `cannot_start`
    /// else; `invalid_arguments` for a timeout past its maximum), one that starts is a
    /// [`Ran`], whatever its exit.
    fn run(&self, command: Command) -> Running<'_>;
}

/// Runs `exec` over `runner`, in a turn of which `within` is left when given.
pub(crate) async fn call(
    runner: &dyn Exec,
    arguments: Value,
    within: Option<Duration>,
) -> Result<Value, Error> {
    let mut command = Command::parse(arguments)?;
    command.within = within;
    Ok(runner.run(command).await?.to_value())
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::schema::assert_answer;

    /// A runner answering every command with `ran`, keeping the last command.
    struct Echo {
        ran: Ran,
        last: Mutex<Option<Command>>,
    }

    impl Exec for Echo {
        fn run(&self, command: Command) -> Running<'_> {
            *self.last.lock().unwrap() = Some(command);
            Box::pin(async { Ok(self.ran.clone()) })
        }
    }

    fn refused(arguments: Value) -> Error {
        Command::parse(arguments).unwrap_err()
    }

    #[test]
    fn a_command_is_checked_at_each_bound_and_past_it() {
        let args = |n: usize| json!({"command": vec!["a"; n]});
        assert!(Command::parse(args(ARGS_MAX)).is_ok());
        assert!(matches!(
            refused(args(ARGS_MAX + 1)),
            Error::TooLarge { what: "command", size, max: ARGS_MAX } if size == ARGS_MAX + 1
        ));
        let bytes = |n: usize| json!({"command": ["p", "x".repeat(n - 1)]});
        assert!(Command::parse(bytes(COMMAND_MAX)).is_ok());
        assert!(matches!(
            refused(bytes(COMMAND_MAX + 1)),
            Error::TooLarge { what: "command", size, max: COMMAND_MAX } if size == COMMAND_MAX + 1
        ));
        let stdin = |n: usize| json!({"command": ["cat"], "stdin": "s".repeat(n)});
        assert!(Command::parse(stdin(STDIN_MAX)).is_ok());
        assert!(matches!(
            refused(stdin(STDIN_MAX + 1)),
            Error::TooLarge {
                what: "stdin",
                max: STDIN_MAX,
                ..
            }
        ));
    }

    #[test]
    fn odd_commands_are_typed_errors() {
        let invalid = |arguments: Value| match refused(arguments) {
            Error::InvalidArguments { pointer, rule, .. } => (pointer, rule),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            invalid(json!({"command": []})),
            ("/command".into(), "minItems".into())
        );
        assert_eq!(
            invalid(json!({"command": [""]})),
            ("/command/0".into(), "minLength".into())
        );
        assert_eq!(
            invalid(json!({"command": ["echo", "a\u{0}b"]})),
            ("/command/1".into(), "nul".into())
        );
        assert_eq!(
            invalid(json!({"command": ["echo"], "timeout": "soon"})),
            ("/timeout".into(), "duration".into())
        );
        assert_eq!(invalid(json!({"command": "echo hi"})).1, "type");
        let parsed = Command::parse(json!({"command": ["true"], "timeout": 1500})).unwrap();
        assert_eq!(parsed.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(parsed.stdin, None);
    }

    #[tokio::test]
    async fn the_answer_fits_the_schema() {
        let mut ran = Ran::new(
            Exit::Code(3),
            Captured::new(b"out\xff".to_vec(), true),
            Captured::default(),
            Duration::from_millis(12),
        );
        let echo = Echo {
            ran: ran.clone(),
            last: Mutex::new(None),
        };
        let args = json!({"command": ["sh", "-c", "exit 3"], "stdin": "in"});
        let answer = call(&echo, args.clone(), None).await.unwrap();
        assert_answer(TOOL, &answer);
        assert_eq!(
            answer,
            json!({"exit_code": 3, "signal": null, "timed_out": false, "duration_ms": 12,
                   "stdout": "out\u{fffd}", "stderr": "",
                   "truncated": {"stdout": true, "stderr": false}})
        );
        let last = echo.last.lock().unwrap().clone().unwrap();
        assert_eq!(last.argv, ["sh", "-c", "exit 3"]);
        assert_eq!(last.stdin.as_deref(), Some("in"));
        assert_eq!(last.within, None, "no turn calls it");
        let within = Duration::from_secs(7);
        call(&echo, args, Some(within)).await.unwrap();
        let last = echo.last.lock().unwrap().clone().unwrap();
        assert_eq!(
            last.within,
            Some(within),
            "the turn's time left reaches the runner"
        );
        ran.exit = Exit::Signal(9);
        ran.timed_out = true;
        let answer = ran.to_value();
        assert_answer(TOOL, &answer);
        assert_eq!(
            (answer["exit_code"].clone(), answer["signal"].clone()),
            (Value::Null, json!(9))
        );
        ran.exit = Exit::Unknown;
        assert_answer(TOOL, &ran.to_value());
    }

    /// An answer of streams `stdout` and `stderr`, not truncated by the runner.
    fn ran(stdout: &str, stderr: &str) -> Ran {
        let captured = |s: &str| Captured::new(s.as_bytes().to_vec(), false);
        Ran::new(
            Exit::Code(0),
            captured(stdout),
            captured(stderr),
            Duration::from_millis(5),
        )
    }

    #[test]
    fn the_answer_is_kept_to_its_bound_and_cut_past_it() {
        let rest = ran("", "").to_value().to_string().len();
        let room = ANSWER_MAX - rest;
        let at = ran(&"x".repeat(room - 2), "\n").to_value();
        assert_eq!(at.to_string().len(), ANSWER_MAX);
        assert_eq!(at["truncated"], json!({"stdout": false, "stderr": false}));
        let past = ran(&"x".repeat(room - 1), "\n").to_value();
        assert!(past.to_string().len() <= ANSWER_MAX);
        assert_eq!(past["truncated"], json!({"stdout": true, "stderr": false}));
        assert_eq!(past["stderr"], "\n");
        // Escapes count as written: a NUL byte is 6 bytes of JSON.
        let nul = ran(&"\0".repeat(ANSWER_MAX), &"\0".repeat(ANSWER_MAX)).to_value();
        let text = nul.to_string();
        assert!(text.len() <= ANSWER_MAX, "{}", text.len());
        assert!(
            text.len() > ANSWER_MAX - 12,
            "the room is used: {}",
            text.len()
        );
        assert_eq!(nul["truncated"], json!({"stdout": true, "stderr": true}));
        assert_eq!(nul["stdout"].as_str().unwrap().len(), (room / 2) / 6);
        // A stream that needs less than half leaves the rest to the other; characters whole.
        let small = ran(&"é".repeat(ANSWER_MAX), "short").to_value();
        assert_eq!(small["stderr"], "short");
        assert_eq!(small["truncated"], json!({"stdout": true, "stderr": false}));
        assert_eq!(
            small["stdout"].as_str().unwrap().len(),
            (room - "short".len()) / 2 * 2
        );
    }

    #[test]
    fn escapes_are_counted_as_serde_json_writes_them() {
        for c in ('\0'..='\u{80}').chain(['é', '€', '😀', '\u{2028}']) {
            let written = serde_json::to_string(&c.to_string()).unwrap().len() - 2;
            assert_eq!(escaped(c), written, "{c:?}");
        }
    }
}
