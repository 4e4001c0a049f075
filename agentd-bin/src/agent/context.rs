//! What a conversation's model is shown, with no IO: the system prompt (the instruction, as it
//! was when the turn started), the messages of the skills its unit has loaded, the summary
//! `context.compact` wrote of its older messages, and the rest of its history; and which
//! messages a compaction replaces.
//!
//! A request borrows the history and the tools offered: asking again costs no copy of them.
//! A history whose tool calls lack a result (a turn that ended in the middle of a round: the
//! daemon stopped, the store failed) is shown with a result saying so for each ([`LOST`]),
//! so that every call the model sees is answered.

use std::borrow::Cow;
use std::collections::BTreeSet;

use super::model::{Function, Message, Request};

/// What the model reads for a call of the history that has no result.
pub(crate) const LOST: &str = "error: the call's result was lost: its turn ended before it came";

/// A conversation as its turns show it: its whole history, and the summary that replaces its
/// first messages in what the model is shown, once `context.compact` wrote one.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Context {
    /// Every message, as the store keeps them.
    pub(crate) history: Vec<Message>,
    /// The summary of the first messages, if they were compacted.
    pub(crate) summary: Option<Summary>,
}

/// A summary the model wrote of the first `through` messages of a history: shown in their
/// place, as a system note.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Summary {
    through: usize,
    text: String,
    shown: Message,
}

impl Summary {
    /// `text`, summarizing the first `through` messages.
    pub(crate) fn new(through: usize, text: String) -> Self {
        let shown = Message::System {
            text: format!(
                "The first {through} messages of this conversation, summarized (they are \
                 kept, but no longer shown): {text}"
            ),
        };
        Self {
            through,
            text,
            shown,
        }
    }

    /// How many messages it replaces.
    pub(crate) fn through(&self) -> usize {
        self.through
    }

    /// Its text.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }
}

impl Context {
    /// A context of `history`, none of it compacted.
    #[cfg(test)]
    pub(crate) fn new(history: Vec<Message>) -> Self {
        Self {
            history,
            summary: None,
        }
    }

    /// How many messages of the history the summary replaces.
    pub(crate) fn summarized(&self) -> usize {
        self.summary.as_ref().map_or(0, Summary::through)
    }

    /// Where a compaction keeping the last `keep` messages of the history cuts it: every
    /// message before is summarized. Never before what is summarized already, and never
    /// between a call and its results: a cut that would fall on a result moves back to the
    /// reply that made the call.
    pub(crate) fn cut(&self, keep: usize) -> usize {
        let from = self.summarized();
        let history = &self.history;
        let mut cut = history.len().saturating_sub(keep).max(from);
        while cut > from && matches!(history.get(cut), Some(Message::Tool { .. })) {
            cut -= 1;
        }
        cut
    }

    /// The messages a compaction cutting at `cut` summarizes, as text for the model: the
    /// summary so far first, then each message on its own line(s).
    pub(crate) fn transcript(&self, cut: usize) -> String {
        let mut text = String::new();
        if let Some(summary) = &self.summary {
            text.push_str("The summary so far: ");
            text.push_str(&summary.text);
            text.push_str("\n\n");
        }
        for message in &self.history[self.summarized()..cut] {
            match message {
                Message::System { text: t } => line(&mut text, "system", t),
                Message::User { text: t } => line(&mut text, "user", t),
                Message::Assistant { text: t, calls } => {
                    if let Some(t) = t {
                        line(&mut text, "assistant", t);
                    }
                    for call in calls {
                        let called = format!("called {}({})", call.name, call.arguments);
                        line(&mut text, "assistant", &called);
                    }
                }
                Message::Tool { call_id, text: t } => {
                    line(&mut text, &format!("result of {call_id}"), t);
                }
            }
        }
        text
    }
}

fn line(text: &mut String, who: &str, what: &str) {
    text.push_str(who);
    text.push_str(": ");
    text.push_str(what);
    text.push('\n');
}

/// What the model is shown: `system`, the `skills`' messages, the summary and the history
/// after it, with a result for each call that has none ([`LOST`], right after its reply's
/// other results; a result of no call shown is left out), and the functions it may call.
pub(crate) fn request<'a>(
    system: &'a Message,
    skills: Vec<Message>,
    context: &'a Context,
    tools: &'a [Function],
) -> Request<'a> {
    let shown = &context.history[context.summarized()..];
    let mut messages = Vec::with_capacity(shown.len() + skills.len() + 2);
    messages.push(Cow::Borrowed(system));
    messages.extend(skills.into_iter().map(Cow::Owned));
    if let Some(summary) = &context.summary {
        messages.push(Cow::Borrowed(&summary.shown));
    }
    // The calls of the last reply not answered yet, in its order.
    let mut waiting: Vec<&str> = Vec::new();
    let unanswered = |waiting: &mut Vec<&str>, messages: &mut Vec<Cow<'a, Message>>| {
        for call_id in waiting.drain(..) {
            messages.push(Cow::Owned(Message::Tool {
                call_id: call_id.to_owned(),
                text: LOST.to_owned(),
            }));
        }
    };
    for message in shown {
        match message {
            Message::Tool { call_id, .. } => {
                let Some(at) = waiting.iter().position(|id| id == call_id) else {
                    continue;
                };
                waiting.remove(at);
            }
            other => {
                unanswered(&mut waiting, &mut messages);
                if let Message::Assistant { calls, .. } = other {
                    let mut ids = BTreeSet::new();
                    // A reply that gave two calls one id is answered once for it.
                    waiting = calls
                        .iter()
                        .filter(|c| ids.insert(c.id.as_str()))
                        .map(|c| c.id.as_str())
                        .collect();
                }
            }
        }
        messages.push(Cow::Borrowed(message));
    }
    unanswered(&mut waiting, &mut messages);
    Request {
        messages,
        tools: Cow::Borrowed(tools),
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::ToolCall;
    use super::*;

    fn user(text: &str) -> Message {
        Message::User { text: text.into() }
    }

    fn system(text: &str) -> Message {
        Message::System { text: text.into() }
    }

    fn asked(ids: &[&str]) -> Message {
        Message::Assistant {
            text: None,
            calls: ids
                .iter()
                .map(|id| ToolCall {
                    id: (*id).into(),
                    name: "f".into(),
                    arguments: "{}".into(),
                })
                .collect(),
        }
    }

    fn result(id: &str) -> Message {
        Message::Tool {
            call_id: id.into(),
            text: "ok".into(),
        }
    }

    fn lost(id: &str) -> Message {
        Message::Tool {
            call_id: id.into(),
            text: LOST.into(),
        }
    }

    fn shown(request: &Request<'_>) -> Vec<Message> {
        request.messages.iter().map(|m| (**m).clone()).collect()
    }

    #[test]
    fn the_system_prompt_and_the_skills_come_first_with_the_tools() {
        let tools = [Function {
            name: "f".into(),
            description: "d".into(),
            parameters: serde_json::json!({"type": "object"}),
        }];
        let sys = system("sys");
        let context = Context::new(vec![user("hi")]);
        let request = request(&sys, vec![user("skill")], &context, &tools);
        assert_eq!(shown(&request), [system("sys"), user("skill"), user("hi")]);
        assert_eq!(*request.tools, tools);
        // Borrowed, not copied.
        assert!(matches!(request.messages[2], Cow::Borrowed(_)));
        assert!(matches!(request.tools, Cow::Borrowed(_)));
    }

    #[test]
    fn every_call_shown_has_a_result() {
        let history = vec![
            user("a"),
            asked(&["1", "2", "3"]),
            result("2"),
            user("b"),
            asked(&["4", "4"]),
            result("9"),
            asked(&["5"]),
        ];
        let sys = system("s");
        let context = Context::new(history);
        assert_eq!(
            shown(&request(&sys, vec![], &context, &[]))[1..],
            [
                user("a"),
                asked(&["1", "2", "3"]),
                result("2"),
                lost("1"),
                lost("3"),
                user("b"),
                asked(&["4", "4"]),
                lost("4"),
                asked(&["5"]),
                lost("5"),
            ]
        );
        // A whole history is shown as it is.
        let whole = vec![user("a"), asked(&["1"]), result("1"), user("b")];
        let context = Context::new(whole.clone());
        assert_eq!(shown(&request(&sys, vec![], &context, &[]))[1..], whole);
    }

    #[test]
    fn a_summary_is_shown_in_place_of_what_it_summarizes() {
        let history = vec![user("a"), asked(&["1"]), result("1"), user("b"), user("c")];
        let mut context = Context::new(history);
        // A cut never falls between a call and its result.
        assert_eq!(context.cut(3), 1);
        assert_eq!(context.cut(2), 3);
        assert_eq!(context.cut(0), 5);
        assert_eq!(context.cut(9), 0);
        assert_eq!(
            context.transcript(3),
            "user: a\nassistant: called f({})\nresult of 1: ok\n"
        );
        context.summary = Some(Summary::new(3, "a, then f".into()));
        let sys = system("s");
        let shown = shown(&request(&sys, vec![], &context, &[]));
        assert_eq!(shown.len(), 4);
        let Message::System { text } = &shown[1] else {
            panic!("{shown:?}")
        };
        assert!(text.starts_with("The first 3 messages") && text.ends_with("a, then f"));
        assert_eq!(shown[2..], [user("b"), user("c")]);
        // Never back before what is summarized; the summary is summarized again.
        assert_eq!(context.cut(9), 3);
        assert_eq!(context.cut(1), 4);
        assert_eq!(
            context.transcript(4),
            "The summary so far: a, then f\n\nuser: b\n"
        );
    }
}
