//! Asking the running daemon through its control socket, as the one-shot commands that act
//! on it do, and the exit status of why it did not answer.

use std::process::ExitCode;

use serde_json::Value;

use crate::config::Config;
use crate::control::{CallError, Request};

/// A command's own exit statuses, by the code of the daemon's refusal.
pub(super) type Codes = &'static [(&'static str, u8)];

/// Sends `request` to the running daemon: its result, or the exit status of why not (said
/// on stderr): 3 when the daemon is not running; for a refusal, the status `codes` gives its
/// code, else 2 for a bad request and 1 for anything else; 1 when the exchange failed.
pub(super) async fn ask(
    config: &Config,
    request: &Request,
    codes: Codes,
) -> Result<Value, ExitCode> {
    crate::control::call(config, request).await.map_err(|e| {
        eprintln!("agentd: {e}");
        ExitCode::from(status(&e, codes))
    })
}

/// The exit status of `e` under `codes`.
fn status(e: &CallError, codes: Codes) -> u8 {
    match e {
        CallError::Connect(..) => 3,
        CallError::Refused(error) => {
            let code = error["code"].as_str().unwrap_or_default();
            match codes.iter().find(|(named, _)| *named == code) {
                Some((_, status)) => *status,
                None if code == "bad_request" => 2,
                None => 1,
            }
        }
        CallError::Encode(_)
        | CallError::Io(_)
        | CallError::NotAnAnswer(_)
        | CallError::Timeout(_) => 1,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_refusal_s_status_is_the_command_s_then_the_common_one() {
        const CODES: Codes = &[("not_found", 4), ("bad_request", 6)];
        let refused = |code: &str| CallError::Refused(json!({"code": code}));
        assert_eq!(status(&refused("not_found"), CODES), 4);
        assert_eq!(
            status(&refused("bad_request"), CODES),
            6,
            "the command's first"
        );
        assert_eq!(status(&refused("bad_request"), &[]), 2);
        assert_eq!(status(&refused("internal"), CODES), 1);
        assert_eq!(status(&CallError::Refused(json!({})), CODES), 1);
    }
}
