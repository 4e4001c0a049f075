//! The `agentd` binary.
//!
//! The supervisor (`agentd run`), the embedded demo (`agentd demo`, feature `demo`), and with a
//! configuration file the one-shot commands of `cli` (`check`, `tools`, `call`, `resources`,
//! `read`, `prompts`, `prompt`), and through the running daemon's control socket `tool`,
//! `events call`, `human` and `workflow`; `revisions` and `--capabilities` say what it speaks and which
//! tools of its own it has.

mod agent;
mod cause;
mod cli;
mod clock;
mod config;
mod content;
mod control;
mod daemon;
#[cfg(feature = "demo")]
mod demo;
mod dial;
mod events;
#[cfg(feature = "exec")]
mod exec;
mod http;
mod human;
mod registry;
mod store;
mod telemetry;
mod tools;
mod workflows;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mcp_wire::Revision;

use crate::telemetry::log::LogLevel;

/// agentd, an agent daemon: its MCP client.
#[derive(Debug, Parser)]
#[command(name = "agentd", version)]
struct Cli {
    /// Print, as JSON, the MCP revisions agentd speaks and its own tools with their default
    /// grants and schemas (`internal_tools`: `inputSchema`, and `outputSchema` once built; a
    /// contract tool has `"contract": true`, its answer the implementing tool's result).
    #[arg(long)]
    capabilities: bool,
    /// The least severe log line written on stderr: error, warn, info (agentd's events), or
    /// debug and trace (with the diagnostics of the MCP libraries). `RUST_LOG` adds
    /// directives of its own (`mcp_transport=debug`).
    #[arg(long, global = true, value_enum, default_value_t = LogLevel::Info)]
    log_level: LogLevel,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    #[cfg(feature = "demo")]
    /// Run the MCP client against an embedded reference server on loopback (one endpoint
    /// per revision): connect, call a tool, watch a resource change. Needs nothing else.
    Demo,
    /// Hold every configured server connected until SIGINT or SIGTERM, then close them
    /// within `lifecycle.drain_timeout`. Logs one NDJSON line per event on stderr.
    Run {
        /// The configuration file.
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
    },
    /// Dial every configured server once, concurrently, and say how each went. Exits 0
    /// when all connected, 1 otherwise.
    Check {
        /// The configuration file.
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// One JSON object per server: {"server", "ok", "protocol", "tools", "error"}.
        #[arg(long)]
        json: bool,
    },
    /// List every configured server's tools, each dialed once; with `--running`, the
    /// supervisor's tool catalogue of the running daemon instead (each held server's tools
    /// as last listed: at its dial, a re-dial or a reload), exit 3 when it is not running.
    Tools {
        /// The configuration file.
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// Ask the running daemon, through its control socket.
        #[arg(long)]
        running: bool,
    },
    /// Call one tool and print its result as JSON. Exits 1 when the tool ran and failed
    /// (`isError`; the result is printed all the same) or the call failed.
    Call {
        /// The configuration file.
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// The server, by its configured name.
        server: String,
        /// The tool.
        tool: String,
        /// The arguments, a JSON object.
        arguments: Option<String>,
    },
    /// List every configured server's resources and resource templates.
    Resources {
        /// The configuration file.
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// One JSON object per resource or template: {"server", "resource" | "template"}.
        #[arg(long)]
        json: bool,
    },
    /// Read one resource and print its contents.
    Read {
        /// The configuration file.
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// The server, by its configured name.
        server: String,
        /// The resource's URI.
        uri: String,
        /// Print the whole result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List every configured server's prompts (a required argument marked `*`).
    Prompts {
        /// The configuration file.
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// One JSON object per prompt: {"server", "prompt"}.
        #[arg(long)]
        json: bool,
    },
    /// Get one prompt with its arguments and print its messages.
    Prompt {
        /// The configuration file.
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// The server, by its configured name.
        server: String,
        /// The prompt.
        name: String,
        /// The arguments, a JSON object of strings.
        arguments: Option<String>,
        /// Print the whole result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the MCP revisions agentd speaks.
    Revisions,
    /// agentd's own tools (memory, artifacts, plans, messages, status, sleep, await,
    /// ask_human, finish, the instruction, skills, and the events tools for an owner) on the
    /// running daemon, through its control socket (`<store.path>/control/agentd.sock`).
    ///
    /// Exit statuses: 0 ok; 1 the tool ran and failed (`agentd: CODE: message`); 2 bad
    /// usage, or arguments that are not a JSON object; 3 the daemon is not running; 4
    /// unknown tool; 5 not granted to the scope; 6 invalid arguments.
    Tool {
        #[command(subcommand)]
        command: ToolCommand,
    },
    /// Say something in one of the running daemon's conversations and print the model's
    /// answer, once the turn that takes the message ends (through the control socket).
    ///
    /// Exit statuses: 0 answered; 1 the turn failed, or the agent stopped before it ended
    /// (`agentd: CODE: message`); 2 bad usage, or a message or conversation id the inbox
    /// refuses; 3 the daemon is not running; 4 the agent is not running (no model is
    /// configured).
    Say {
        /// The configuration file (its `store.path` is read).
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// The conversation: `root`, the instance's own, unless given; another is made by
        /// its first message.
        #[arg(long)]
        conversation: Option<String>,
        /// What to say.
        text: String,
    },
    /// MCP Events: what arrived.
    Events {
        #[command(subcommand)]
        command: EventsCommand,
    },
    /// The questions put to people on the running daemon (`ask_human`'s, and servers'
    /// elicitations), through its control socket: list them, answer one. An answer is JSON
    /// that fits the question's schema; a question is open while its asker waits (a server's
    /// elicitation: 300 s, then it is answered cancel).
    ///
    /// Exit statuses: 0 ok; 1 the daemon could not answer; 2 bad usage, or an answer that
    /// is not JSON; 3 the daemon is not running; 4 no open question of that id; 5 the answer
    /// refused (it does not fit the schema, or is past 16 KiB: the reason names the JSON
    /// pointer and the rule), the question still open.
    Human {
        #[command(subcommand)]
        command: HumanCommand,
    },
    /// Workflow runs on the running daemon, through its control socket: start one, see how
    /// one stands.
    ///
    /// Exit statuses: 0 ok (the run printed as JSON); 1 the daemon could not answer; 2 bad
    /// usage, or an input that is not JSON; 3 the daemon is not running; 4 no workflow or run
    /// of that name; 6 the input does not fit the workflow's input schema.
    Workflow {
        #[command(subcommand)]
        command: WorkflowCommand,
    },
}

#[derive(Debug, Subcommand)]
enum WorkflowCommand {
    /// Start a run of a workflow (of the configuration, or made with `workflow.create`) and
    /// print it as JSON: its id (`run`), its status, its steps.
    Run {
        /// The configuration file (its `store.path` is read).
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// The workflow.
        name: String,
        /// The input, JSON (`{}` when not given), checked against the workflow's input
        /// schema.
        #[arg(allow_hyphen_values = true)]
        input: Option<String>,
    },
    /// Print a run as it stands, as JSON: its status, its current step, each step's status,
    /// attempts and output, its output or error. Without a run, every run the store keeps,
    /// oldest first, a summary a line.
    Status {
        /// The configuration file (its `store.path` is read).
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// The run's id.
        run: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum HumanCommand {
    /// List the open questions, oldest first: `ID  ORIGIN  FROM  "QUESTION"  SCHEMA` a line
    /// (ORIGIN `ask_human` or `elicitation`; FROM the asking unit, or the server).
    List {
        /// The configuration file (its `store.path` is read).
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// The JSON array of the questions: {"id", "origin", "from", "question", "schema",
        /// "asked_ms"}.
        #[arg(long)]
        json: bool,
    },
    /// Answer an open question with JSON that fits its schema, and print
    /// {"id", "answered": true}.
    ///
    /// Exit statuses: 0 answered; 1 the daemon could not answer; 2 bad usage, or an answer
    /// that is not JSON; 3 the daemon is not running; 4 no open question of that id
    /// (answered, withdrawn, or never asked); 5 the answer refused (it does not fit the
    /// schema, or is past 16 KiB: the reason names the JSON pointer and the rule), the
    /// question still open.
    Answer {
        /// The configuration file (its `store.path` is read).
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// The question's id.
        id: u64,
        /// The answer, JSON (an elicitation's: an object, the form's content).
        #[arg(allow_hyphen_values = true)]
        answer: String,
    },
}

#[derive(Debug, Subcommand)]
enum ToolCommand {
    /// List the tools offered to a scope (as `[tools.grants]` narrows them).
    List {
        /// The configuration file (its `store.path` is read).
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// The scope: root, workflow or subagent.
        #[arg(long, default_value = "root")]
        scope: String,
        /// The JSON array of the tools: {"name", "description", "inputSchema", "grants"}.
        #[arg(long)]
        json: bool,
    },
    /// Call one tool as an operator acting as a scope, and print its result as JSON.
    ///
    /// Exit statuses: 0 ok; 1 the tool ran and failed (`agentd: CODE: message`); 2 bad
    /// usage, or arguments that are not a JSON object; 3 the daemon is not running; 4
    /// unknown tool; 5 not granted to the scope; 6 invalid arguments (the message names
    /// the JSON pointer and the rule).
    Call {
        /// The configuration file (its `store.path` is read).
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// The scope whose grants apply: root, workflow or subagent.
        #[arg(long, default_value = "root")]
        scope: String,
        /// Whose call an events tool's is: the owner of the subscriptions it makes (an
        /// `[[events.grants]]` owner). Needed by events.list, events.subscribe,
        /// events.unsubscribe and events.subscriptions; the other tools take no owner.
        #[arg(long, required_if_eq_any = agentd_tools::events::TOOLS.map(|t| ("tool", t)))]
        owner: Option<String>,
        /// The conversation of the unit.
        #[arg(long)]
        conversation: Option<String>,
        /// The workflow run of the unit.
        #[arg(long)]
        run: Option<String>,
        /// The step of the run.
        #[arg(long)]
        step: Option<String>,
        /// The subagent of the unit.
        #[arg(long)]
        subagent: Option<String>,
        /// The tool.
        tool: String,
        /// The arguments, a JSON object.
        arguments: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum EventsCommand {
    /// Print every event of a stream (a binding's `into`), oldest first, one JSON object per
    /// line.
    Tail {
        /// The configuration file (its `store.path` is read).
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// The stream.
        stream: String,
    },
    /// Call one of the events tools on the running daemon and print its result as JSON:
    /// `agentd tool call --owner OWNER --scope SCOPE TOOL [ARGUMENTS]`, its exit statuses.
    Call {
        /// The configuration file (its `store.path` is read).
        #[arg(long, default_value = "agentd.toml")]
        config: PathBuf,
        /// Whose call it is: the owner of the subscriptions it makes (an
        /// `[[events.grants]]` owner).
        #[arg(long, default_value = "root")]
        owner: String,
        /// The scope whose grant applies: root, workflow or subagent.
        #[arg(long, visible_alias = "kind", default_value = "root")]
        scope: String,
        /// The tool.
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(agentd_tools::events::TOOLS))]
        tool: String,
        /// The arguments, a JSON object.
        arguments: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.capabilities {
        crate::say!("{}", capabilities());
        return ExitCode::SUCCESS;
    }
    let Some(command) = cli.command else {
        let hint = if cfg!(feature = "demo") {
            "`agentd demo`, or `agentd --help`"
        } else {
            "`agentd --help`"
        };
        eprintln!("agentd: a command is needed (try {hint})");
        return ExitCode::from(2);
    };
    let level = cli.log_level;
    match command {
        Command::Revisions => {
            for revision in Revision::ALL {
                crate::say!("{revision}  ({} era)", revision.era());
            }
            ExitCode::SUCCESS
        }
        Command::Run { config } => {
            let path = config.clone();
            with_config(&config, level, |c| daemon::run(c, path))
        }
        Command::Check { config, json } => with_config(&config, level, |c| cli::check(c, json)),
        Command::Tools { config, running } => {
            with_config(&config, level, |c| cli::tools(c, running))
        }
        Command::Call {
            config,
            server,
            tool,
            arguments,
        } => with_config(&config, level, |c| async move {
            cli::call(c, &server, &tool, arguments.as_deref()).await
        }),
        Command::Resources { config, json } => {
            with_config(&config, level, |c| cli::resources(c, json))
        }
        Command::Read {
            config,
            server,
            uri,
            json,
        } => with_config(&config, level, |c| async move {
            cli::read(c, &server, &uri, json).await
        }),
        Command::Prompts { config, json } => with_config(&config, level, |c| cli::prompts(c, json)),
        Command::Prompt {
            config,
            server,
            name,
            arguments,
            json,
        } => with_config(&config, level, |c| async move {
            cli::prompt(c, &server, &name, arguments.as_deref(), json).await
        }),
        Command::Tool {
            command:
                ToolCommand::List {
                    config,
                    scope,
                    json,
                },
        } => with_config(&config, level, |c| async move {
            cli::tool_list(&c, scope, json).await
        }),
        Command::Tool {
            command:
                ToolCommand::Call {
                    config,
                    scope,
                    owner,
                    conversation,
                    run,
                    step,
                    subagent,
                    tool,
                    arguments,
                },
        } => {
            let unit = cli::Unit {
                scope: Some(scope),
                owner,
                conversation,
                run,
                step,
                subagent,
            };
            with_config(&config, level, |c| async move {
                cli::tool_call(&c, tool, arguments.as_deref(), unit).await
            })
        }
        Command::Say {
            config,
            conversation,
            text,
        } => with_config(&config, level, |c| async move {
            cli::say(&c, conversation, text).await
        }),
        Command::Events {
            command: EventsCommand::Tail { config, stream },
        } => with_config(&config, level, |c| async move {
            cli::events_tail(&c, &stream).await
        }),
        Command::Events {
            command:
                EventsCommand::Call {
                    config,
                    owner,
                    scope,
                    tool,
                    arguments,
                },
        } => {
            let unit = cli::Unit {
                scope: Some(scope),
                owner: Some(owner),
                ..cli::Unit::default()
            };
            with_config(&config, level, |c| async move {
                cli::tool_call(&c, tool, arguments.as_deref(), unit).await
            })
        }
        Command::Human {
            command: HumanCommand::List { config, json },
        } => with_config(&config, level, |c| async move {
            cli::human_list(&c, json).await
        }),
        Command::Human {
            command: HumanCommand::Answer { config, id, answer },
        } => with_config(&config, level, |c| async move {
            cli::human_answer(&c, id, &answer).await
        }),
        Command::Workflow {
            command:
                WorkflowCommand::Run {
                    config,
                    name,
                    input,
                },
        } => with_config(&config, level, |c| async move {
            cli::workflow_run(&c, &name, input.as_deref()).await
        }),
        Command::Workflow {
            command: WorkflowCommand::Status { config, run },
        } => with_config(&config, level, |c| async move {
            cli::workflow_status(&c, run.as_deref()).await
        }),
        #[cfg(feature = "demo")]
        Command::Demo => {
            telemetry::log::install(level, demo::INSTANCE);
            let Some(runtime) = runtime() else {
                return ExitCode::FAILURE;
            };
            match runtime.block_on(demo::run()) {
                Ok(summary) => {
                    crate::say!("agentd demo: the MCP client against two embedded servers");
                    for line in summary {
                        crate::say!("  {line}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("agentd demo failed: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// The most threads the main runtime starts for blocking work (name lookups, mostly); past
/// them such work waits its turn. Each is let go after 10 s idle.
const BLOCKING_THREADS: usize = 16;

/// The main runtime: a worker thread per core, and at most [`BLOCKING_THREADS`] more.
fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(BLOCKING_THREADS)
        .enable_all()
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(e) => {
            eprintln!("agentd: cannot start a runtime: {e}");
            None
        }
    }
}

/// Loads the configuration, writes the log lines at `level` from then on, and runs `command`
/// on it.
fn with_config<F, Fut>(path: &Path, level: LogLevel, command: F) -> ExitCode
where
    F: FnOnce(config::Config) -> Fut,
    Fut: Future<Output = ExitCode>,
{
    let config = match cli::load(path) {
        Ok(config) => config,
        Err(code) => return code,
    };
    telemetry::log::install(level, &config.instance);
    match runtime() {
        Some(runtime) => {
            let code = runtime.block_on(command(config));
            // What the command left (a name resolution under way, a drained task) is not
            // waited for.
            runtime.shutdown_background();
            code
        }
        None => ExitCode::FAILURE,
    }
}

/// `agentd --capabilities`.
fn capabilities() -> serde_json::Value {
    let tools: Vec<serde_json::Value> = agentd_tools::catalogue()
        .iter()
        .map(|t| {
            let grants: Vec<&str> = t.grants.iter().map(|g| g.as_str()).collect();
            // A contract tool is built here: the registry calls its implementation.
            let contract = agentd_tools::contract::is_contract(t.name);
            let output = match (&t.output_schema, contract) {
                (Some(schema), _) => Some(schema.clone()),
                (None, true) => Some(agentd_tools::contract::output_schema()),
                (None, false) => None,
            };
            let mut tool = serde_json::json!({
                "name": t.name,
                "grants": grants,
                "does": t.does,
                "inputSchema": t.input_schema,
                "built": output.is_some(),
            });
            if let Some(schema) = output {
                tool["outputSchema"] = schema;
            }
            if contract {
                tool["contract"] = true.into();
            }
            tool
        })
        .collect();
    let revisions: Vec<&str> = Revision::ALL.iter().rev().map(|r| r.as_str()).collect();
    serde_json::json!({"revisions": revisions, "internal_tools": tools})
}
