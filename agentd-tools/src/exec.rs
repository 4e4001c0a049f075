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
    /// Whether its timeout ended it.
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
    /// by U+FFFD (so a stream cut inside a character ends with one).
    pub fn to_value(&self) -> Value {
        let (code, signal) = match self.exit {
            Exit::Code(code) => (Some(code), None),
            Exit::Signal(signal) => (None, Some(signal)),
            Exit::Unknown => (None, None),
        };
        let text = |c: &Captured| String::from_utf8_lossy(&c.bytes).into_owned();
        json!({
            "exit_code": code,
            "signal": signal,
            "timed_out": self.timed_out,
            "duration_ms": u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
            "stdout": text(&self.stdout),
            "stderr": text(&self.stderr),
            "truncated": {"stdout": self.stdout.truncated, "stderr": self.stderr.truncated},
        })
    }
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

/// Runs `exec` over `runner`.
pub(crate) async fn call(runner: &dyn Exec, arguments: Value) -> Result<Value, Error> {
    let command = Command::parse(arguments)?;
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
        let answer = call(&echo, args).await.unwrap();
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
}
