//! `agentd human list` and `agentd human answer`: the questions put to people on the running
//! daemon (`ask_human`'s and servers' elicitations), through its control socket.
//!
//! Exit statuses of `answer`: 0 answered; 1 the answer could not be given (the store failed,
//! no answer came back); 2 bad usage, or an answer that is not JSON; 3 the daemon is not
//! running; 4 no open question of that id (answered, withdrawn, or never asked); 5 the answer
//! refused (it does not fit the question's schema, or is past 16 KiB), the reason on stderr
//! (`agentd: bad_answer: …`, naming the JSON pointer and the rule) and the question still
//! open. `list` exits 0, 1 or 3 the same way.

use std::process::ExitCode;

use serde_json::Value;

use super::daemon::{Codes, ask};
use super::json::say_json;
use crate::config::Config;
use crate::control::{Answer, Questions, Request};

/// The exit statuses of the daemon's refusals.
const CODES: Codes = &[("not_found", 4), ("bad_answer", 5), ("too_large", 5)];

/// `agentd human list`: the open questions, oldest first, a line each (`ID  ORIGIN  FROM
/// QUESTION  SCHEMA`, the question as a JSON string, the schema as compact JSON), or the
/// JSON array of them.
pub(crate) async fn human_list(config: &Config, json: bool) -> ExitCode {
    let request = Request::Questions(Questions { questions: true });
    let questions = match ask(config, &request, CODES).await {
        Ok(questions) => questions,
        Err(code) => return code,
    };
    if json {
        say_json(&questions);
    } else {
        for q in questions.as_array().into_iter().flatten() {
            crate::say!(
                "{}  {}  {}  {}  {}",
                q["id"],
                q["origin"].as_str().unwrap_or_default(),
                q["from"].as_str().unwrap_or_default(),
                q["question"],
                q["schema"]
            );
        }
    }
    ExitCode::SUCCESS
}

/// `agentd human answer ID JSON`: answers open question `id` with `answer` (JSON text); the
/// daemon's result printed as JSON.
pub(crate) async fn human_answer(config: &Config, id: u64, answer: &str) -> ExitCode {
    let answer: Value = match serde_json::from_str(answer) {
        Ok(answer) => answer,
        Err(e) => {
            eprintln!("agentd: the answer must be JSON: {e}");
            return ExitCode::from(2);
        }
    };
    let request = Request::Answer(Answer {
        question: id,
        answer,
    });
    match ask(config, &request, CODES).await {
        Ok(result) => {
            crate::say!("{result}");
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}
