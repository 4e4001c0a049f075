//! The one-shot commands that read a configuration and dial its servers once, a file each:
//! `check`, `tools`, `call`, `resources`, `read`, `prompts`, `prompt`, and through the
//! running daemon's control socket `tool list`, `tool call` (`events call` is `tool call`
//! of an events tool), `human list`, `human answer`, `workflow run`, `workflow status` and `say`.

mod call;
mod check;
mod daemon;
mod events;
mod human;
mod json;
mod prompts;
mod resources;
mod say;
mod servers;
mod tool;
mod tools;
mod workflow;

use std::path::Path;
use std::process::ExitCode;

pub(crate) use call::call;
pub(crate) use check::check;
pub(crate) use events::events_tail;
pub(crate) use human::{human_answer, human_list};
pub(crate) use prompts::{prompt, prompts};
pub(crate) use resources::{read, resources};
pub(crate) use say::say;
pub(crate) use tool::{Unit, tool_call, tool_list};
pub(crate) use tools::tools;
pub(crate) use workflow::{workflow_run, workflow_status};

use crate::config::{self, Config};

/// Loads the configuration, or says why not (naming the key and the position).
pub(crate) fn load(path: &Path) -> Result<Config, ExitCode> {
    config::load(path, &|name| std::env::var(name).ok()).map_err(|e| {
        eprintln!("agentd: {e}");
        ExitCode::from(2)
    })
}
