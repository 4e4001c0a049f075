//! `agentd say`: a message into one of the running daemon's conversations, through its
//! control socket; the model's answer printed once the turn that takes it ends.
//!
//! Exit statuses: 0 answered (the answer printed; nothing when the model said nothing); 1
//! the turn failed, or no answer came: its end was missed, or the agent stopped first (a
//! shutdown, a reload that changed `[model]`), said as `agentd: CODE: message`; 2 bad usage,
//! or a message or conversation id the inbox refuses (empty, or past its bound); 3 the daemon
//! is not running; 4 the agent is not running (no model is configured); 5 the instance's
//! token budget is spent (`limits.budget_tokens`): no turn started, and the message waits in
//! the inbox for a reload that raises the budget.

use std::process::ExitCode;

use super::daemon::{Codes, ask};
use crate::config::Config;
use crate::control::{Request, Say};

/// The exit statuses of the daemon's refusals.
const CODES: Codes = &[
    ("no_agent", 4),
    ("budget_spent", 5),
    ("invalid_arguments", 2),
    ("too_large", 2),
];

/// `agentd say [--conversation C] TEXT`.
pub(crate) async fn say(config: &Config, conversation: Option<String>, text: String) -> ExitCode {
    let request = Request::Say(Say {
        say: text,
        conversation,
    });
    match ask(config, &request, CODES).await {
        Ok(answer) => {
            if let Some(text) = answer["text"].as_str() {
                crate::say!("{text}");
            }
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}
